"""Registries of named parts (retrievers, entity extractors, readers): the built-in entries are
listed where each registry is defined, and third-party packages add theirs through an
entry-point group, loaded the first time a name is not among the built-ins, e.g. in a plugin's
``pyproject.toml``::

    [project.entry-points."isorag_pyg.extractors"]
    spacy = "my_plugin.extractors:SpacyExtractor"

Nothing is registered by importing a module for its side effects.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Mapping[str, T], Generic[T]):
    """Name -> entry: ``builtins``, then the entry points of ``group`` (a plugin cannot replace a
    built-in name). An unknown name is a ``ValueError`` listing the known ones.

    Example:
        >>> colours = Registry({"red": 1, "blue": 2}, group="isorag_pyg.example", kind="colour")
        >>> colours["red"], sorted(colours)
        (1, ['blue', 'red'])
        >>> colours["green"]
        Traceback (most recent call last):
        ...
        ValueError: unknown colour 'green'; choose from red, blue
    """

    def __init__(self, builtins: Mapping[str, T], group: str, kind: str):
        self._entries: dict[str, T] = dict(builtins)
        self.group, self.kind = group, kind
        self._plugins_loaded = False

    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        for point in entry_points(group=self.group):
            if point.name not in self._entries:
                self._entries[point.name] = point.load()

    def __getitem__(self, name: str) -> T:
        if name not in self._entries:
            self._load_plugins()
        if name not in self._entries:
            raise ValueError(f"unknown {self.kind} {name!r}; choose from {', '.join(self._entries)}")
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        if name not in self._entries:
            self._load_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        self._load_plugins()
        return iter(self._entries)

    def __len__(self) -> int:
        self._load_plugins()
        return len(self._entries)
