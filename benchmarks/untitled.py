"""Retrieval on corpora without titles: a user's own documents, where the graph must come from the text.

    python -m benchmarks.untitled [--datasets musique hotpotqa 2wikimultihopqa] [--graphs title_mention comention entity_graph auto]

For each shared dataset, with every passage's title blanked (ids kept, so gold passages are still
known) and with titles kept, and for each graph (``title_mention``; ``comention``: the
``entity_comention`` builder with df <= 20; ``entity_graph``: passage + entity nodes from the
LLM-free rule extractor; ``auto``: what ``ISORAGIndex.build`` chooses by default, reported with
titles kept, where it differs from ``entity_graph``; ``adjacent`` never applies here: these
corpora are not chunked documents) the script

The question sets are cut to fit a shared 2-core machine: the first ``--dev-questions`` dev and
``--train-questions`` training questions, each over the passages of their own contexts (the
real distractors), or for 2Wiki's dev file, which names gold titles only, over their gold
passages plus passages of the full corpus drawn at random, ``--dev-passages`` in all. Then

1. builds the graph over the training questions' corpus and chooses, on those training questions only, ISO-RAG's knobs (real φ) over
   ``ISO_GRID`` and global PPR's over ``PPR_GRID`` (best Recall@5, first in grid order on ties);
2. builds the same graph over the dev corpus and reports, on the dev questions (never used for any
   choice): dense, BM25, global PPR (default and train-tuned knobs), ISO-RAG with the index's
   default knobs (``iso``: what ``ISORAGIndex.build`` stores for that graph, see
   isorag_pyg/graph/auto.py) and with the train-tuned knobs, and the uniform and shuffled φ
   ablations of both.

It also times the LLM-free entity graph over the full 6,119-passage 2Wiki corpus, embeddings given. Writes benchmarks/results/untitled.json.
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import logging
import time
from typing import Any

import torch

from benchmarks.common import PPR_GRID, RESULTS, results_name, settings, setup, write_json
from isorag_pyg import ISORAGIndex, PhiSpec
from isorag_pyg.datasets.types import Passage, QADataset
from isorag_pyg.evaluation.metrics import retrieval_metrics
from isorag_pyg.graph import build_corpus_graph, run_builders
from isorag_pyg.retrieval import Queries

GRAPHS: dict[str, dict[str, dict[str, Any]] | None] = {
    "title_mention": {"title_mention": {}},
    "comention": {"entity_comention": {"max_df": 20}},
    "entity_graph": {"entity_graph": {}},
    "auto": None,  # ISORAGIndex.build's own choice
}
ISO_GRID = {"hops": [1, 2], "alpha": [0.5, 0.85], "beta": [0.05, 0.2, 0.5], "lambda_graph": [0.9, 0.5]}
ABLATIONS = ("uniform", "shuffled")


def blanked(corpus: list[Passage]) -> list[Passage]:
    """The corpus with every title blanked, ids kept."""
    return [dataclasses.replace(p, title="") for p in corpus]


@dataclasses.dataclass
class Split:
    """An index over one split's corpus, its encoded questions and their gold rows."""

    index: ISORAGIndex
    queries: Queries
    gold: list[set[int]]

    def recall(self, retriever: str, **knobs: Any) -> dict[str, float]:
        result = self.index.retriever(retriever, device="cpu", **knobs).retrieve(self.queries, 10)
        return retrieval_metrics(result.indices, self.gold)


def question_subset(dataset: QADataset, num_questions: int, num_passages: int, seed: int = 0) -> tuple[QADataset, str]:
    """The first ``num_questions`` questions over the passages of their contexts where the file
    gives contexts; otherwise (2Wiki's titles-only dev file) over their gold passages plus passages
    drawn at random (seeded) from the rest of the corpus, ``num_passages`` in all. Returns the
    subset and how its corpus was made."""
    questions = dataset.questions[:num_questions]
    if all(q.context_ids for q in questions):
        wanted = {pid for q in questions for pid in q.context_ids}
        how = "the passages of these questions' contexts"
    else:
        wanted = {pid for q in questions for pid in q.gold_ids}
        rest = [p.id for p in dataset.corpus if p.id not in wanted]
        order = torch.randperm(len(rest), generator=torch.Generator().manual_seed(seed)).tolist()
        wanted |= {rest[i] for i in order[: max(0, num_passages - len(wanted))]}
        how = f"these questions' gold passages plus passages of the full corpus drawn at random (seed {seed})"
    corpus = [p for p in dataset.corpus if p.id in wanted]
    return dataclasses.replace(dataset, questions=questions, corpus=corpus), f"{len(questions)} questions, {len(corpus)} passages: {how}"


def prepare(dataset: QADataset, titles: bool, graph: dict[str, Any] | None) -> Split:
    """Index ``dataset``'s corpus (titles kept or blanked) with ``graph`` (φ counts nodes, no f_θ)."""
    corpus = dataset.corpus if titles else blanked(dataset.corpus)
    index = ISORAGIndex.build(corpus, graph=graph, f_theta=None, phi=PhiSpec(p=0.0), progress=False)
    row_of_text = {(p.title, p.text): r for r, p in enumerate(index.passages)}  # passages merged as duplicates keep a row
    original = {p.id: (p.title, p.text) for p in corpus}
    gold = []
    for q in dataset.questions:
        rows = {index.passages.row_of(g) for g in q.gold_ids}
        rows |= {row_of_text.get(original[g]) for g in q.gold_ids if index.passages.row_of(g) is None and g in original}
        gold.append({r for r in rows if r is not None})
    texts = [q.text for q in dataset.questions]
    return Split(index, index.encode_questions(texts), gold)


def best(split: Split, retriever: str, grid: dict[str, list]) -> tuple[dict[str, Any], float]:
    """The setting of ``grid`` with the best Recall@5 of ``retriever`` on ``split``."""
    scored = [(split.recall(retriever, **s)["recall@5"], i, s) for i, s in enumerate(settings(grid))]
    recall, _, setting = max(scored, key=lambda t: (t[0], -t[1]))
    return setting, recall


def evaluate(train: Split, dev: Split) -> dict[str, Any]:
    """Knobs chosen on ``train``; every retriever's metrics on ``dev``."""
    iso_knobs, iso_train = best(train, "iso", ISO_GRID)
    ppr_knobs, ppr_train = best(train, "ppr", PPR_GRID)
    runs = {"dense": {}, "bm25": {}, "ppr": {}, "ppr_tuned": ppr_knobs, "iso": {}, "iso_tuned": iso_knobs}
    for mode in ABLATIONS:
        runs[f"iso_{mode}"] = {"phi_mode": mode}
        runs[f"iso_tuned_{mode}"] = {**iso_knobs, "phi_mode": mode}
    metrics = {}
    for label, knobs in runs.items():
        name = label.split("_")[0] if label.startswith(("iso", "ppr")) else label
        metrics[label] = dev.recall(name, **knobs)
    return {"train_choice": {"iso": iso_knobs, "iso_train_recall@5": iso_train, "ppr": ppr_knobs, "ppr_train_recall@5": ppr_train},
            "index_knobs": dev.index.knobs, "statistics": _statistics(dev.index), "metrics": metrics}


def _statistics(index: ISORAGIndex) -> dict[str, Any]:
    keys = ("passages", "entities", "edges", "isolated_passage_share", "degree_max", "largest_hubs")
    return {k: index.statistics.get(k) for k in keys}


def entity_graph_seconds(corpus: list[Passage], dim: int = 384) -> dict[str, Any]:
    """Seconds to build the entity graph (extraction, nodes, edges, entity vectors, the merged
    graph) over ``corpus`` with blank titles, given its embeddings: unit vectors of the encoder's
    size stand in for the cached ones (their values do not change the work)."""
    corpus = blanked(corpus)
    x = torch.nn.functional.normalize(torch.randn(len(corpus), dim, generator=torch.Generator().manual_seed(0)), dim=-1)
    start, cpu_start = time.perf_counter(), time.process_time()
    data = build_corpus_graph(corpus, x, run_builders({"entity_graph": {}}, corpus, x))
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    # wall time depends on what else the machine runs; CPU time is this process's own work
    return {"passages": len(corpus), "entities": len(data.entity_names), "edges": data.edge_index.size(1) // 2,
            "seconds": seconds, "cpu_seconds": cpu_seconds, "passages_per_second": len(corpus) / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["musique", "hotpotqa", "2wikimultihopqa"])
    parser.add_argument("--graphs", nargs="+", default=list(GRAPHS), choices=list(GRAPHS))
    parser.add_argument("--titles", nargs="+", default=["blank", "kept"], choices=["blank", "kept"])
    parser.add_argument("--train-questions", type=int, default=50, help="training questions the knobs are chosen on")
    parser.add_argument("--dev-questions", type=int, default=100, help="dev questions evaluated (the first ones)")
    parser.add_argument("--dev-passages", type=int, default=1200, help="corpus size where the dev file gives no contexts (2Wiki)")
    parser.add_argument("--out", type=results_name, default="untitled.json", help="results file under benchmarks/results/")
    args = parser.parse_args()
    if min(args.train_questions, args.dev_questions, args.dev_passages) < 1:
        raise SystemExit("--train-questions, --dev-questions and --dev-passages must be >= 1")
    logging.basicConfig(level=logging.WARNING)
    results, timing = [], None
    for dataset in args.datasets:
        chosen = setup(f"dataset={dataset}")
        dev_ds, train_ds = chosen.dataset, chosen.train
        if dataset == "2wikimultihopqa":
            timing = entity_graph_seconds(dev_ds.corpus)
            print(f"entity graph over the {timing['passages']} passages of 2Wiki's dev corpus: {timing['seconds']:.1f} s "
                  f"({timing['cpu_seconds']:.1f} s CPU)", flush=True)
        dev_ds, dev_corpus = question_subset(dev_ds, args.dev_questions, args.dev_passages)
        train_ds, train_corpus = question_subset(train_ds, args.train_questions, args.dev_passages)
        for titles, graph in itertools.product(args.titles, args.graphs):
            if graph == "auto" and titles == "blank":
                continue  # blank titles: the automatic graph is the entity graph alone
            start = time.perf_counter()
            dev = prepare(dev_ds, titles == "kept", GRAPHS[graph])
            entry = evaluate(prepare(train_ds, titles == "kept", GRAPHS[graph]), dev)
            entry = {"dataset": dataset, "titles": titles, "graph": graph, "builders": dev.index.statistics["builders"],
                     "dev": dev_corpus, "train": train_corpus, "seconds": time.perf_counter() - start, **entry}
            results.append(entry)
            r5 = {k: round(v["recall@5"], 3) for k, v in entry["metrics"].items()}
            print(f"{dataset} titles {titles} {graph}: {r5}", flush=True)
            write_results(args.out, results, timing)


def write_results(name: str, results: list[dict[str, Any]], timing: dict[str, Any] | None) -> None:
    """Write ``results`` into ``RESULTS/name``, keeping the entries of other (dataset, titles,
    graph) runs already there (so datasets can run as separate processes into one file)."""
    path, key = RESULTS / name, (lambda e: (e["dataset"], e["titles"], e["graph"]))
    old = json.loads(path.read_text()) if path.is_file() else {}
    mine = {key(e) for e in results}
    merged = [e for e in old.get("results", []) if key(e) not in mine] + results
    write_json(name, {"split": "dev; knobs chosen on training questions (iso_tuned, ppr_tuned) or the index defaults (iso, ppr)",
                      "iso_grid": ISO_GRID, "ppr_grid": PPR_GRID, "entity_graph_2wiki": timing or old.get("entity_graph_2wiki"),
                      "results": merged})


if __name__ == "__main__":
    main()
