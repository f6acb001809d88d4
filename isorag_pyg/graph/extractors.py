"""The entity extractors the ``entity_graph`` builder can name (its ``extractor`` argument):
``rules`` (:class:`~isorag_pyg.graph.rule_extractor.RuleExtractor`, no model) and ``openie``
(:class:`~isorag_pyg.graph.openie.OpenIEExtractor`, an LLM behind an OpenAI-compatible server),
e.g. ``graph={"entity_graph": {"extractor": "openie", "extractor_args": {"base_url": ..., "model": ...}}}``;
plugins add theirs through the ``isorag_pyg.extractors`` entry-point group."""
from __future__ import annotations

from collections.abc import Callable

from isorag_pyg.graph.extraction import EntityExtractor
from isorag_pyg.graph.openie import OpenIEExtractor
from isorag_pyg.graph.rule_extractor import RuleExtractor
from isorag_pyg.plugins import Registry

#: Extractor name -> class (called with the builder's ``extractor_args``).
EXTRACTORS: Registry[Callable[..., EntityExtractor]] = Registry(
    {RuleExtractor.name: RuleExtractor, OpenIEExtractor.name: OpenIEExtractor}, group="isorag_pyg.extractors", kind="entity extractor")
