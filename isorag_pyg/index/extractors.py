"""Entity extractors the ``entity_graph`` builder can name: the graph layer's own (``rules``)
and, registered here because the graph layer may not import the LLM client, ``openie``
(:class:`~isorag_pyg.qa.openie.OpenIEExtractor`), e.g.
``graph={"entity_graph": {"extractor": "openie", "extractor_args": {"base_url": ..., "model": ...}}}``."""
from __future__ import annotations

from isorag_pyg.graph.entity_graph import EXTRACTORS
from isorag_pyg.qa.openie import OpenIEExtractor

EXTRACTORS.setdefault(OpenIEExtractor.name, OpenIEExtractor)
