"""The benchmarks behind every measured number in the docs, run from the repository root as
``python -m benchmarks.<name>`` (JSON to ``benchmarks/results/``); what they share is in
:mod:`benchmarks.common`."""
