"""Registries: built-ins listed where each registry is defined, third-party entries through entry
points, never a registration by importing a module for its side effects."""
from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from isorag_pyg import plugins
from isorag_pyg.graph.extractors import EXTRACTORS
from isorag_pyg.graph.openie import OpenIEExtractor
from isorag_pyg.graph.rule_extractor import RuleExtractor
from isorag_pyg.index import RETRIEVERS
from isorag_pyg.plugins import Registry
from isorag_pyg.qa.generators import READERS, OpenAIChatGenerator, TransformersGenerator


def test_built_in_entries_exist_without_importing_anything_else():
    assert dict(EXTRACTORS) == {"rules": RuleExtractor, "openie": OpenIEExtractor}
    assert dict(READERS) == {"openai": OpenAIChatGenerator, "transformers": TransformersGenerator}
    assert {"iso", "iso_uniform", "iso_shuffled", "iso_random", "dense", "bm25", "ppr"} <= set(RETRIEVERS)


def test_a_plugin_adds_a_name_through_its_entry_point_group(monkeypatch):
    point = EntryPoint(name="spacy", value="collections:OrderedDict", group="isorag_pyg.extractors")
    shadow = EntryPoint(name="rules", value="collections:Counter", group="isorag_pyg.extractors")
    monkeypatch.setattr(plugins, "entry_points", lambda group: [point, shadow] if group == "isorag_pyg.extractors" else [])
    registry = Registry({"rules": RuleExtractor}, group="isorag_pyg.extractors", kind="entity extractor")
    from collections import OrderedDict

    assert registry["spacy"] is OrderedDict and "spacy" in registry
    assert registry["rules"] is RuleExtractor  # a plugin cannot replace a built-in
    with pytest.raises(ValueError, match="unknown entity extractor 'nope'; choose from rules, spacy"):
        registry["nope"]


def test_an_unknown_name_is_an_error_naming_the_known_ones():
    with pytest.raises(ValueError, match="unknown retriever 'nope'; choose from iso,"):
        RETRIEVERS["nope"]
    with pytest.raises(ValueError, match="unknown reader 'nope'; choose from openai, transformers"):
        READERS["nope"]
