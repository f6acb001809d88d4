"""A six-passage corpus without titles whose passages share names, dates and numbers: the entity-
graph tests' corpus."""
from __future__ import annotations

from isorag_pyg import ISORAGIndex, PhiSpec
from isorag_pyg.datasets.types import Passage

TEXTS = [
    "Velmora is a film directed by Dara Quen. It premiered on 3 March 1984.",
    "Dara Quen was born in Kostrov in 1950.",
    "Kostrov is a city in Aldania, known for its silver market.",
    "Aldania is a country. Its flag is green; it was founded in 1950.",
    "The silver market of Kostrov opens in 1984 in the old square.",
    "a quiet note without any name at all.",
]


CORPUS = [Passage(str(i), "", text) for i, text in enumerate(TEXTS)]


def entity_index() -> ISORAGIndex:
    """The index of :data:`CORPUS` on its automatic graph (an entity graph: it has no titles), φ counting nodes."""
    return ISORAGIndex.build(CORPUS, f_theta=None, phi=PhiSpec(p=0.0), progress=False)
