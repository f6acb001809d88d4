"""Corpus poisoning without an LLM: how far injected passages get into each retriever's top 5.

    python -m benchmarks.poisoning [--datasets 2wikimultihopqa musique hotpotqa] [--split dev train] [--seed 0]

For each shared dataset and split, a cut of about ``--passages`` (1,200) passages around a question
subset (:func:`~benchmarks.common.poisoning_cut`: the first questions whose contexts fit, or for
2Wiki's titles-only dev file 100 questions over their gold passages plus random ones), titles
kept, indexed as ``ISORAGIndex.build`` does by default (``graph=None``: title mentions + the
entity graph; the knobs the index stores for it). ``--targets`` (40) questions are drawn (seeded)
among the cut's questions that name an entity; the attacks (:func:`~benchmarks.common.poisoning_attacks`,
templated, several template variants per class, seeded by ``--seed``, the dataset and the split):

* ``answer``: PoisonedRAG's black-box answer injection: for ``--answer-targets`` (8) targets, 5
  passages each = the question + a false statement with an attacker-chosen wrong answer;
* ``relation``: GragPoison-like relation injection: ``--injected`` (8) passages, each tying the
  named entities of ``--per-passage`` (5) targets (as ISO-RAG's query matching reads them) to one
  invented entity in fluent sentences; ``relation_4x10``: half as many passages, twice the targets each;
* ``stuffing``: ``--injected`` "see also"/list passages naming 20 of the corpus's 40 most
  frequent entities and the entities of ``--per-passage`` targets each;
* ``boilerplate``: one navigation/footer text appended to ``--boilerplate-share`` (20%) of the
  passages (a crawl's noise; no targets, no injected passages).

Every attacked index is built by ``ISORAGIndex.build`` over the attacked corpus (what a rebuild
gives), and for each retriever (dense, BM25, global PPR, ISO-RAG and its uniform and shuffled φ
ablations and HippoRAG 2's walk, each with the knobs the index stores; the study flags, e.g.
``--entity-gates`` or ``--vouched``, add ISO-RAG with other knobs) the script reports clean
Recall@5 (unattacked index) and Recall@5 under attack, for the targeted and for the untargeted
questions, ASR@5 (share of targets with at least one injected passage in the top 5) and the mean number of injected passages per top 5 (boilerplate: the share
of top-5 slots held by passages with the footer, against their share of the corpus). It also
checks that ``index.add`` of the injected passages (boilerplate: ``remove`` + ``add`` of the
changed passages) gives the same top 5s as the rebuild (``add_equals_rebuild``: share of
questions with identical top-5 ids). With ``--blank-titles`` every title is blanked, the injected
passages' too (a corpus without titles: the index builds the entity graph alone). Writes benchmarks/results/poisoning.json (entries of other
(dataset, split) runs already there are kept).
"""
from __future__ import annotations

import argparse
import json
import logging
import time
from contextlib import ExitStack
from typing import Any

from benchmarks.common import (
    ATTACK_CLASSES,
    POISON_PREFIX,
    RESULTS,
    Attack,
    MemoEncoder,
    add_override_argument,
    blanked,
    frequent_entities,
    poisoning_attacks,
    poisoning_cut,
    poisoning_targets,
    reader_config,
    results_name,
    setup,
    template,
    write_json,
)
from isorag_pyg import ISORAGIndex
from isorag_pyg.datasets.types import Passage, Question
from isorag_pyg.index.registry import resolve_knobs
from isorag_pyg.qa import OpenAIChatGenerator, answer_questions, normalize_answer
from isorag_pyg.qa.llama_server import LlamaServer, ReaderSettings
from isorag_pyg.qa.models import packaged_gemma
from isorag_pyg.retrieval import Queries
from isorag_pyg.utils.bridging import bridge_mask

#: Compared side by side: label -> (retriever name, knobs over the index's stored ones). ``iso``
#: leaves its strongest bridges out of the walk (``bridge_share``) and walks one-way mentions
#: backwards at a lower weight (``backlink_weight``) and ranks near-duplicates after the rest
#: (``near_duplicate_cosine``) and gates the mass of the entities a question names by cosine
#: (``entity_gate``); ``iso_no_bridges``, ``iso_full_backlinks``, ``iso_near_duplicates_kept`` and
#: ``iso_no_entity_gate`` are ISO-RAG without one of them; the φ ablations ablate the bridging scores too.
RETRIEVERS: dict[str, tuple[str, dict[str, Any]]] = {
    "dense": ("dense", {}), "bm25": ("bm25", {}), "ppr": ("ppr", {}), "hipporag": ("hipporag", {}),
    "iso": ("iso", {}), "iso_no_bridges": ("iso", {"bridge_share": 0.0}), "iso_full_backlinks": ("iso", {"backlink_weight": 1.0}),
    "iso_near_duplicates_kept": ("iso", {"near_duplicate_cosine": 2.0}), "iso_no_entity_gate": ("iso", {"entity_gate": 0.0}),
    "iso_uniform": ("iso_uniform", {}),
    "iso_shuffled": ("iso_shuffled", {}),
}
K = 5


def build(corpus: list[Passage], encoder: MemoEncoder) -> ISORAGIndex:
    """What ``ISORAGIndex.build`` gives by default (automatic graph, φ counting nodes, no f_θ),
    embedded through ``encoder``'s memory (the same model)."""
    return ISORAGIndex.build(corpus, encoder=encoder, progress=False)


def gold_rows(index: ISORAGIndex, questions: list[Question]) -> list[set[int]]:
    return [{r for g in q.gold_ids if (r := index.passages.row_of(g)) is not None} for q in questions]


def top_k(index: ISORAGIndex, queries: Queries, names: dict[str, tuple[str, dict[str, Any]]], k: int = K) -> dict[str, list[list[str]]]:
    """Each retriever's top-``k`` passage ids per question (the index's stored knobs, then the label's)."""
    ids = index.passages.ids
    out = {}
    for label, (name, knobs) in names.items():
        rows = index.retriever(name, device="cpu", **knobs).retrieve(queries, k).indices.tolist()
        out[label] = [[ids[r] for r in row if r >= 0] for row in rows]
    return out


def bridging_report(index: ISORAGIndex, injected: set[str], shares: dict[str, float]) -> dict[str, Any]:
    """How the bridging scores see the injected passages: their ranks among the passages (1 =
    highest score), and for each ``bridge_share`` the injected and the other passages the walk leaves out."""
    n = len(index)
    order = index.bridging[:n].argsort(descending=True).tolist()
    rank = {index.passages[r].id: i + 1 for i, r in enumerate(order)}
    out: dict[str, Any] = {"injected_ranks": sorted(rank[i] for i in injected)}
    for label, share in shares.items():
        left = {index.passages[r].id for r in bridge_mask(index.bridging, share, n).nonzero().squeeze(1).tolist()}
        out[label] = {"bridge_share": share, "injected_left_out": len(left & injected), "others_left_out": len(left - injected)}
    return out


def _recall(top: list[str], gold: set[str]) -> float:
    return len(gold & set(top)) / len(gold)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def attack_metrics(clean: list[list[str]], attacked: list[list[str]], gold: list[set[str]], targets: list[int],
                   injected: set[str], modified: set[str] = frozenset(), k: int = K) -> dict[str, Any]:
    """One retriever's metrics under one attack, from its top-``k`` ids per question on the clean
    and on the attacked index: Recall@k (clean and attacked) of the targeted and of the untargeted
    questions (those with a gold passage), ASR@k (share of targets with an injected passage in the
    top k), injected passages per top k (targeted, untargeted), and for attacks that change
    passages (``modified``) the share of top-k slots they hold."""
    targeted = set(targets)
    groups = {"targeted": [q for q in range(len(gold)) if q in targeted], "untargeted": [q for q in range(len(gold)) if q not in targeted]}
    out: dict[str, Any] = {}
    for label, members in groups.items():
        scored = [q for q in members if gold[q]]
        out[label] = {
            "questions": len(members),
            f"clean_recall@{k}": _mean([_recall(clean[q][:k], gold[q]) for q in scored]),
            f"attacked_recall@{k}": _mean([_recall(attacked[q][:k], gold[q]) for q in scored]),
            f"injected_per_top{k}": _mean([float(sum(p in injected for p in attacked[q][:k])) for q in members]),
        }
    out[f"asr@{k}"] = _mean([float(any(p in injected for p in attacked[q][:k])) for q in groups["targeted"]])
    if modified:
        out[f"modified_share_top{k}"] = _mean([sum(p in modified for p in attacked[q][:k]) / k for q in range(len(gold))])
        out[f"modified_share_top{k}_clean"] = _mean([sum(p in modified for p in clean[q][:k]) / k for q in range(len(gold))])
    return out


def add_equals_rebuild(clean_corpus: list[Passage], attack: Attack, rebuilt: dict[str, list[list[str]]], queries: Queries,
                       names: dict[str, tuple[str, dict[str, Any]]], encoder: MemoEncoder) -> dict[str, float]:
    """Per retriever, the share of questions whose top-5 ids after updating a clean index in place
    (``add`` of the injected passages; ``remove`` + ``add`` of the changed ones) equal the
    rebuild's, in order (``identical``) and as sets (``same_set``: a remove + add renumbers rows,
    which can reorder ties)."""
    index = build(clean_corpus, encoder)
    if attack.modified:
        index.remove([p.id for p in attack.modified])
    index.add(attack.modified + attack.injected, encoder=encoder)
    updated = top_k(index, queries, names)
    return {name: {"identical": sum(a == b for a, b in zip(updated[name], rebuilt[name])) / len(queries),
                   "same_set": sum(set(a) == set(b) for a, b in zip(updated[name], rebuilt[name])) / len(queries)} for name in names}


#: Read by the packaged reader under answer injection (``--reader``).
READ_BY = ("dense", "ppr", "hipporag", "iso", "iso_no_bridges", "iso_near_duplicates_kept")


def reader_check(generator: Any, prompt: Any, index: ISORAGIndex, questions: list[Question], queries: Queries, attack: Attack,
                 max_questions: int) -> dict[str, Any]:
    """The packaged reader given each retriever's attacked top 5: for the targets, the share of
    answers that contain the attacker's answer (normalised); for up to ``max_questions`` questions
    (the targets first), EM and F1 against the gold answers."""
    chosen = list(dict.fromkeys([*attack.targets, *range(len(questions))]))[:max_questions]
    asked = [questions[i] for i in chosen]
    subset = Queries([queries.texts[i] for i in chosen], queries.embeddings[chosen])
    out = {}
    for label in READ_BY:
        name, knobs = RETRIEVERS[label]
        rows = index.retriever(name, device="cpu", **knobs).retrieve(subset, K).indices.tolist()
        metrics, answers = answer_questions(generator, prompt, asked, [[index.passages[r] for r in row if r >= 0] for row in rows])
        fooled = [f" {normalize_answer(attack.wrong_answers[i])} " in f" {normalize_answer(a['answer'])} "
                  for i, a in zip(chosen, answers) if i in attack.wrong_answers]
        out[label] = {"questions": len(asked), "em": metrics["em"], "f1": metrics["f1"],
                      "targets_with_attacker_answer": _mean([float(f) for f in fooled])}
    return out


def run_cut(dataset: str, split: str, args: argparse.Namespace, names: dict[str, tuple[str, dict[str, Any]]], encoder: MemoEncoder,
            reading: tuple[Any, Any] | None = None) -> dict[str, Any]:
    """One cut's clean and attacked indexes and every retriever's metrics (``reading``: the reader
    and its prompt for :func:`reader_check`)."""
    start = time.perf_counter()
    chosen = setup(f"dataset={dataset}", *args.override)
    full = chosen.dataset if split == "dev" else chosen.train
    if full is None:
        raise SystemExit(f"{dataset} has no {split} questions")
    cut, how = poisoning_cut(full, args.passages)
    prepare = blanked if args.blank_titles else list  # what the index sees of a corpus: titles kept or blank
    questions, corpus = cut.questions, prepare(cut.corpus)
    seed = f"{args.seed}:{dataset}:{split}"
    clean = build(corpus, encoder)
    queries = Queries([q.text for q in questions], encoder.encode([q.text for q in questions]))
    gold = [set(q.gold_ids) & set(clean.passages.ids) for q in questions]
    targets = poisoning_targets(questions, args.targets, seed)
    attacks = poisoning_attacks(questions, corpus, targets, frequent_entities(clean), seed, args.injected, args.per_passage,
                                args.answer_targets, 5, 20, args.boilerplate_share)
    clean_top = top_k(clean, queries, names)
    entry: dict[str, Any] = {
        "dataset": dataset, "split": split, "cut": how, "titles": "blank" if args.blank_titles else "kept", "passages": len(clean), "questions": len(questions),
        "questions_with_gold": sum(bool(g) for g in gold), "targets": [questions[t].id for t in targets],
        "builders": clean.statistics.get("builders"), "knobs": clean.knobs,
        "graph": {key: clean.statistics.get(key) for key in ("passages", "entities", "edges", "largest_hubs")},
        "clean_recall@5": {name: _mean([_recall(top[:K], g) for top, g in zip(clean_top[name], gold) if g]) for name in names},
        "attacks": {},
    }
    for name in args.attacks:
        attack = attacks[name]
        index = build(prepare(attack.corpus(corpus)), encoder)
        attacked_top = top_k(index, queries, names)
        injected = {p.id for p in attack.injected}
        modified = {p.id for p in attack.modified}
        assert all(i.startswith(POISON_PREFIX) for i in injected)
        shares = {label: knobs.get("bridge_share", resolve_knobs("iso", index.knobs, {})[0].bridge_share)
                  for label, (name, knobs) in names.items() if name == "iso"}
        result = {
            "bridging": bridging_report(index, injected, shares) if injected else None,
            "description": attack.description, "injected": len(attack.injected), "modified": len(attack.modified),
            "targets": len(attack.targets), "graph_edges": index.statistics.get("edges"), "entities": index.statistics.get("entities"),
            "examples": [{"id": p.id, "title": p.title, "text": p.text} for p in prepare(attack.injected or attack.modified)[:2]],
            "metrics": {r: attack_metrics(clean_top[r], attacked_top[r], gold, attack.targets, injected, modified) for r in names},
        }
        if reading is not None and attack.wrong_answers and split == "dev":  # the targets are dev questions; train cuts choose knobs
            result["reader"] = reader_check(*reading, index, questions, queries, attack, args.reader_questions)
        if args.check_add:
            result["add_equals_rebuild"] = add_equals_rebuild(corpus, attack, attacked_top, queries, names, encoder)
        entry["attacks"][name] = result
    entry["seconds"] = time.perf_counter() - start
    return entry


def _fmt(value: float | None) -> str:
    return "  -  " if value is None else f"{value:.3f}"


def print_entry(entry: dict[str, Any]) -> None:
    for name, attack in entry["attacks"].items():
        for label, m in (attack.get("reader") or {}).items():
            print(f"{entry['dataset']} {entry['split']} {name} reader on {label}: attacker's answer in {m['targets_with_attacker_answer']:.3f} "
                  f"of targets; EM {m['em']:.3f} F1 {m['f1']:.3f} over {m['questions']} questions")
    print(f"\n{entry['dataset']} {entry['split']}: {entry['cut']} ({'+'.join(entry['builders'])}; {entry['seconds']:.0f} s)")
    print(f"{'attack':<14} {'retriever':<13} {'ASR@5':>6} {'inj/top5':>8}   {'targeted R@5 clean->att':>24}   {'untargeted R@5 clean->att':>26}   add=rebuild")
    for name, attack in entry["attacks"].items():
        for retriever, m in attack["metrics"].items():
            t, u = m["targeted"], m["untargeted"]
            extra = f"   footer share of top 5 {m['modified_share_top5']:.3f} (clean {m['modified_share_top5_clean']:.3f})" if "modified_share_top5" in m else ""
            check = attack.get("add_equals_rebuild", {}).get(retriever, {}).get("identical")
            print(f"{name:<14} {retriever:<13} {_fmt(m['asr@5']):>6} {_fmt(t['injected_per_top5']):>8}   "
                  f"{_fmt(t['clean_recall@5']):>11} -> {_fmt(t['attacked_recall@5']):<9}   "
                  f"{_fmt(u['clean_recall@5']):>13} -> {_fmt(u['attacked_recall@5']):<9}   {_fmt(check)}{extra}")


def write_results(name: str, entries: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """Write ``entries`` into ``RESULTS/name``, keeping other (dataset, split) entries already there."""
    path, key = RESULTS / name, (lambda e: (e["dataset"], e["split"]))
    old = json.loads(path.read_text()) if path.is_file() else {}
    mine = {key(e) for e in entries}
    merged = [e for e in old.get("results", []) if key(e) not in mine] + entries
    write_json(name, {"protocol": "LLM-free templated attacks (benchmarks.common.poisoning_attacks), seeded; every attacked index "
                                  "rebuilt by ISORAGIndex.build with the default graph and the knobs it stores; nothing tuned",
                      "settings": {k: getattr(args, k) for k in ("seed", "passages", "targets", "injected", "per_passage", "answer_targets",
                                                                 "boilerplate_share")},
                      "results": merged})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["2wikimultihopqa", "musique", "hotpotqa"])
    parser.add_argument("--split", nargs="+", default=["dev", "train"], choices=["dev", "train"],
                        help="whose questions the cut is made around (choose any defense on train)")
    parser.add_argument("--attacks", nargs="+", default=list(ATTACK_CLASSES), choices=list(ATTACK_CLASSES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--passages", type=int, default=1200, help="passages of each cut (about)")
    parser.add_argument("--targets", type=int, default=40, help="target questions drawn from the cut")
    parser.add_argument("--injected", type=int, default=8, help="passages of relation injection and entity stuffing")
    parser.add_argument("--per-passage", type=int, default=5, help="targets per relation / stuffing passage")
    parser.add_argument("--answer-targets", type=int, default=8, help="targets of answer injection (5 passages each)")
    parser.add_argument("--boilerplate-share", type=float, default=0.2)
    parser.add_argument("--blank-titles", action="store_true", help="blank every title, the injected passages' too (a corpus without titles)")
    parser.add_argument("--no-check-add", dest="check_add", action="store_false", help="skip the index.add = rebuild check")
    parser.add_argument("--bridge-shares", nargs="*", type=float, default=[],
                        help="also run ISO-RAG with these bridge_share values (iso@SHARE; the choice of the default, on train)")
    parser.add_argument("--backlink-weights", nargs="*", type=float, default=[],
                        help="also run ISO-RAG with these backlink_weight values (iso@backlinkW; the choice of the default, on train)")
    parser.add_argument("--near-duplicate-cosines", nargs="*", type=float, default=[],
                        help="also run ISO-RAG with these near_duplicate_cosine values (iso@dupC; the choice of the default, on train)")
    parser.add_argument("--entity-gates", nargs="*", type=float, default=[],
                        help="also run ISO-RAG with these entity_gate values (iso@gateG; the choice of the default, on train)")
    parser.add_argument("--vouch-shares", nargs="*", type=float, default=[],
                        help="also run ISO-RAG with these vouch_share values (iso@vouchS; the choice of the default, on train)")
    parser.add_argument("--vouched", action="store_true",
                        help="also run ISO-RAG with unique_mentions_vouched (iso_vouched; off by default: its clean cost on train)")
    parser.add_argument("--reader", action="store_true", help="answer injection on the dev cuts: ask the packaged Gemma 3 270M (llama-cpp-python's server)")
    parser.add_argument("--reader-questions", type=int, default=100, help="questions read per cut, the targets first")
    parser.add_argument("--threads", type=int, default=ReaderSettings().threads,
                        help="llama.cpp threads (default: every core; 1 on a machine shared with other busy processes)")
    parser.add_argument("--out", type=results_name, default="poisoning.json")
    add_override_argument(parser)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    names = {**RETRIEVERS, **{f"iso@{share:g}": ("iso", {"bridge_share": share}) for share in args.bridge_shares},
             **{f"iso@backlink{weight:g}": ("iso", {"backlink_weight": weight}) for weight in args.backlink_weights},
             **{f"iso@dup{cosine:g}": ("iso", {"near_duplicate_cosine": cosine}) for cosine in args.near_duplicate_cosines},
             **{f"iso@gate{slope:g}": ("iso", {"entity_gate": slope}) for slope in args.entity_gates},
             **{f"iso@vouch{share:g}": ("iso", {"vouch_share": share}) for share in args.vouch_shares},
             **({"iso_vouched": ("iso", {"unique_mentions_vouched": True})} if args.vouched else {})}
    encoder = MemoEncoder()
    entries = []
    with ExitStack() as stack:
        if args.reader:  # the reader of benchmarks/qa.py: its server, prompt and decoding
            reader = reader_config()
            server = stack.enter_context(LlamaServer(packaged_gemma(), alias="gemma-3-270m", settings=ReaderSettings(threads=args.threads)))
            generator = OpenAIChatGenerator(server.base_url, server.model, concurrency=1, max_retries=2, timeout=600, temperature=0.0,
                                            max_tokens=int(reader["max_tokens"]), stop=list(reader["stop"]))
            reading = (generator, template("fewshot"))
        else:
            reading = None
        for dataset in args.datasets:
            for split in args.split:
                entry = run_cut(dataset, split, args, names, encoder, reading)
                print_entry(entry)
                entries.append(entry)
                write_results(args.out, entries, args)


if __name__ == "__main__":
    main()
