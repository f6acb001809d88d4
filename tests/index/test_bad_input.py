"""Bad input, end to end through the index: a corpus that is mostly boilerplate, a passage that
names thousands of entities, an ``add`` of thousands of near-duplicates. Each finishes in
bounded time with a report, and no legitimate passage is lost. A hashing encoder stands in for a
model, so nothing loads."""
from __future__ import annotations

import logging
import random
import re
import resource
import time
import zlib

import torch

from isorag_pyg import ISORAGIndex, PhiSpec
from isorag_pyg.datasets.corpus_report import MAX_PASSAGE_CHARS

FOOTER = "Home | About Us | Contact Northwind Media | Privacy Policy | Terms of Use | Copyright Harbor Publishing Group"
_WORD = re.compile(r"\w+")


class HashEncoder:
    """A deterministic stand-in for a sentence encoder: each word hashed into one of 64 dimensions,
    counted, the vector L2-normalised."""

    name, fingerprint, backend = "hash", "hash-64-v1", "torch"

    def encode(self, texts: list[str]) -> torch.Tensor:
        rows, cols = [], []
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.casefold()):
                rows.append(row)
                cols.append(zlib.crc32(word.encode()) % 64)
        x = torch.zeros(len(texts), 64)
        x.index_put_((torch.tensor(rows, dtype=torch.long), torch.tensor(cols, dtype=torch.long)), torch.ones(len(rows)), accumulate=True)
        return torch.nn.functional.normalize(x + 1e-6, dim=-1)


def pseudo_names(count: int, seed: int, syllables: int = 3) -> list[str]:
    """``count`` distinct capitalised pseudo-words ("Kavelu"), ending in a vowel (no plural to merge)."""
    rng = random.Random(seed)
    names: set[str] = set()
    while len(names) < count:
        names.add("".join(rng.choice("bdfgklmnprtvz") + rng.choice("aeiou") for _ in range(syllables)).capitalize())
    return sorted(names)


def build(passages: list[dict[str, str]]) -> ISORAGIndex:
    index = ISORAGIndex.build(passages, encoder=HashEncoder(), f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    index.encoder = HashEncoder()  # the questions' encoder too
    return index


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def test_a_mostly_boilerplate_corpus_builds_in_bounded_time_and_keeps_its_real_passages(caplog):
    n = 2000
    people, places = pseudo_names(n, seed=1), pseudo_names(200, seed=2, syllables=2)
    texts = [f"{people[i]} was born in {places[i % 200]} and studied with {people[(i * 7 + 1) % n]}." for i in range(n)]
    passages = [{"id": str(i), "text": text + (" " + FOOTER if i % 5 else "")} for i, text in enumerate(texts)]  # 80% carry the footer
    start = time.perf_counter()
    with caplog.at_level(logging.WARNING, logger="isorag_pyg.graph.entity_graph"):
        index = build(passages)
    seconds = time.perf_counter() - start
    print(f"\nboilerplate corpus: {n} passages built in {seconds:.1f} s, {index.graph.num_nodes} nodes, {index.statistics['edges']} edges")
    assert seconds < 120 and len(index) == n
    footer_names = {"home", "about us", "contact northwind media", "privacy policy", "terms of use", "terms", "copyright harbor publishing group"}
    entity_names = {name.casefold() for name in index.graph.entity_names}
    assert not footer_names & entity_names and {place.casefold() for place in places} <= entity_names  # the places stay
    assert index.statistics["entity_graph_boilerplate_entities"] == 7
    assert ["privacy policy", 1600] in index.statistics["entity_graph_boilerplate_top"]
    assert sum("boilerplate" in r.getMessage() for r in caplog.records) == 1
    row = 1234  # carries the footer
    question = f"Was {people[row]} born in {places[row % 200]}?"
    assert index.retrieve([question], k=5, entity_gate=0.0)[0][0].id == str(row)  # the question's entities find it
    # the hash encoder ranks an unrelated passage without the footer first by cosine (0.76 against 0.49), and the entity
    # gate trusts cosine: the passage stays in the top 2, not first
    assert str(row) in [h.id for h in index.retrieve([question], k=5)[0][:2]]


def test_a_passage_naming_thousands_of_entities_is_reported_as_the_strongest_bridge_not_dropped():
    names = pseudo_names(2000, seed=3)
    stuffed = ", ".join(names) + "."
    assert len(stuffed) <= MAX_PASSAGE_CHARS
    passages = [{"id": f"p{i}", "text": f"{' and '.join(names[5 * i:5 * i + 5])} met in the valley in spring."} for i in range(400)]
    passages.append({"id": "stuffed", "text": stuffed})
    start = time.perf_counter()
    index = build(passages)
    built = time.perf_counter() - start
    bridges = index.bridges(top=3)
    hits = index.retrieve([f"Where did {names[42]} meet {names[43]}?"], k=5)[0]
    seconds = time.perf_counter() - start
    print(f"\nstuffed passage: {len(index.graph.entity_names)} entity nodes, built in {built:.1f} s, bridges + retrieval {seconds - built:.1f} s")
    assert seconds < 120 and len(index) == 401 and len(index.graph.entity_names) == 2000  # every name ties the stuffed passage to one other
    assert bridges[0].id == "stuffed" and bridges[0].left_out and bridges[0].score > bridges[1].score
    assert index.passages[index.passages.row_of("stuffed")].text == stuffed  # reported, not deleted
    assert "p8" in [hit.id for hit in hits]


def test_an_add_of_ten_thousand_near_duplicates_keeps_them_all_in_bounded_time_and_says_so(caplog):
    count = 10_000
    base = [{"id": f"b{i}", "text": f"{name} was born in Kostrov and studied with Dara Quen."} for i, name in enumerate(pseudo_names(20, seed=4))]
    index = build(base)
    additions = [{"text": f"Acme Widget {i} is a gadget sold by Acme Corp in Springfield."} for i in range(1, count + 1)]
    rss_before, start = peak_rss_mib(), time.perf_counter()
    with caplog.at_level(logging.WARNING):
        report = index.add(additions, encoder=HashEncoder())
    seconds, rss_after = time.perf_counter() - start, peak_rss_mib()
    print(f"\nadd of {count} near-duplicates: {seconds:.1f} s, peak RSS {rss_before:.0f} -> {rss_after:.0f} MiB; {report.summary()}")
    assert seconds < 60 and rss_after - rss_before < 2048
    assert len(index) == 20 + count and report.added == count and report.duplicates_skipped == 0  # nothing lost
    assert {a["text"] for a in additions} <= {p.text for p in index.passages}
    assert report.near_duplicates == count - 1 and f"({count - 1} of them near-duplicates" in report.summary()
    assert any(f"{count - 1} of the {count} new passages repeat another passage's text but for its numbers" in r.getMessage() for r in caplog.records)
    # the words every new passage repeats are boilerplate: no hub of 10,000 mentions for φ and the bridging scores to walk
    assert {"acme widget", "acme corp", "springfield"} <= {name for name, _ in index.statistics["entity_graph_boilerplate_top"]}
    assert {"kostrov", "dara quen"} <= set(index.graph.entity_names)  # the base index's own links stay
