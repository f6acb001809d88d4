"""Retrieval on corpora without titles: a user's own documents, where the graph must come from the text.

    python -m benchmarks.blank_titles [--datasets musique hotpotqa 2wikimultihopqa] [--graphs title_mention comention entity_graph auto]

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

``iso_passage_seeds`` is ISO-RAG's default without query-matched entity seeds (``entity_seeds=0``;
equal to ``iso`` on graphs without entity nodes), ``iso_reentry`` with the walk allowed back into
them (``reenter_entity_seeds``), ``iso_no_unique_mentions`` without the passages seeded for an
entity only they mention (``unique_mention_seeds``). It also times the LLM-free entity graph over
the full 6,119-passage 2Wiki corpus, embeddings given.

``--study`` instead runs :func:`train_study` on each dataset's training questions (the evidence
for the automatic graph's title-share threshold, :func:`title_share_threshold`, and for the
``entity_seeds`` default). Writes benchmarks/results/blank_titles.json.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import time
from typing import Any

import torch

from benchmarks.common import PPR_GRID, RESULTS, Split, blanked, question_subset, results_name, settings, setup, titles_split, write_json
from isorag_pyg import ISORAGIndex
from isorag_pyg.datasets.types import Passage, QADataset
from isorag_pyg.graph import build_corpus_graph, run_builders
from isorag_pyg.graph.auto import auto_graph, title_mention_share

GRAPHS: dict[str, dict[str, dict[str, Any]] | None] = {
    "title_mention": {"title_mention": {}},
    "comention": {"entity_comention": {"max_df": 20}},
    "entity_graph": {"entity_graph": {}},
    "auto": None,  # ISORAGIndex.build's own choice (auto_graph), made on the dev corpus
}
ISO_GRID = {"hops": [1, 2], "alpha": [0.5, 0.85], "beta": [0.05, 0.2, 0.5], "lambda_graph": [0.9, 0.5]}
#: HippoRAG 2's walk: its damping, passage-node weight and whether it follows the mention weights
HIPPORAG_GRID = {"alpha": [0.3, 0.5, 0.7], "passage_node_weight": [0.01, 0.05, 0.2], "edge_weights": [False, True]}
ABLATIONS = ("uniform", "shuffled")


#: Training study: the shares of titles kept, the entity-seed shares tried, and the entity graph's
#: mention weighting (the builder's ``idf_power``) crossed with the retrievers' knobs it interacts with.
TITLE_FRACTIONS = (0.0, 0.25, 0.5, 1.0)
ENTITY_SEED_SHARES = (0.0, 0.25, 0.5, 0.75)
IDF_POWERS = (0.0, 1.0, 2.0)
WEIGHTING_GRID = {"max_expansion": [100, 400], "beta": [0.05, 0.1, 0.2], "tau": [10.0, 20.0], "lambda_graph": [0.9, 0.8]}


def best(split: Split, retriever: str, grid: dict[str, list]) -> tuple[dict[str, Any], float]:
    """The setting of ``grid`` with the best Recall@5 of ``retriever`` on ``split``."""
    scored = [(split.recall(retriever, **s)["recall@5"], i, s) for i, s in enumerate(settings(grid))]
    recall, _, setting = max(scored, key=lambda t: (t[0], -t[1]))
    return setting, recall


def evaluate(train: Split, dev: Split) -> dict[str, Any]:
    """Knobs chosen on ``train``; every retriever's metrics on ``dev``."""
    iso_knobs, iso_train = best(train, "iso", ISO_GRID)
    ppr_knobs, ppr_train = best(train, "ppr", PPR_GRID)
    hippo_knobs, hippo_train = best(train, "hipporag", HIPPORAG_GRID)
    runs = {"dense": {}, "bm25": {}, "ppr": {}, "ppr_tuned": ppr_knobs, "hipporag": {}, "hipporag_tuned": hippo_knobs, "iso": {}, "iso_tuned": iso_knobs,
            "iso_no_bridges": {"bridge_share": 0.0},  # ISO-RAG without leaving its strongest bridges out
            "iso_passage_seeds": {"entity_seeds": 0.0},  # without query-matched entity seeds (equal to iso without entity nodes)
            "iso_reentry": {"reenter_entity_seeds": True},  # the walk may step back into them (equal to iso without entity nodes)
            "iso_no_unique_mentions": {"unique_mention_seeds": False}}  # no passage seeded for an entity only it mentions
    for mode in ABLATIONS:
        runs[f"iso_{mode}"] = {"phi_mode": mode}
        runs[f"iso_tuned_{mode}"] = {**iso_knobs, "phi_mode": mode}
    metrics, milliseconds = {}, {}
    for label, knobs in runs.items():
        name = label.split("_")[0] if label.startswith(("iso", "ppr", "hipporag")) else label
        start = time.perf_counter()
        metrics[label] = dev.recall(name, **knobs)
        milliseconds[label] = 1000 * (time.perf_counter() - start) / len(dev.gold)  # batched over the dev questions, encoded before
    return {"train_choice": {"iso": iso_knobs, "iso_train_recall@5": iso_train, "ppr": ppr_knobs, "ppr_train_recall@5": ppr_train,
                             "hipporag": hippo_knobs, "hipporag_train_recall@5": hippo_train},
            "index_knobs": dev.index.knobs, "statistics": _statistics(dev.index), "metrics": metrics,
            "milliseconds_per_question": milliseconds}


def _statistics(index: ISORAGIndex) -> dict[str, Any]:
    keys = ("passages", "entities", "edges", "isolated_passage_share", "degree_max", "largest_hubs")
    return {k: index.statistics.get(k) for k in keys}


def train_study(train_ds: QADataset) -> dict[str, Any]:
    """On TRAINING questions only: (1) for corpora with a share of their titles kept, the share of
    passages title mentions touch and ISO-RAG's Recall@5 (index defaults) with ``title_mention``
    alone against ``title_mention`` + ``entity_graph``, the evidence the automatic choice's
    threshold is chosen on; (2) on blank titles, ISO-RAG's Recall@5 on the entity graph per
    share of the teleport mass given to query-matched entity seeds; (3) on both, ISO-RAG with the
    walk allowed back into those seeds (``reenter_entity_seeds``; ``*_reentry``) and without
    seeding the passage that alone mentions an entity the question names
    (``unique_mention_seeds``; ``*_no_unique_mentions``)."""
    titles = []
    for keep in TITLE_FRACTIONS:
        row: dict[str, Any] = {"titles_kept": keep, "title_mention_share": title_mention_share(blanked(train_ds.corpus, keep))}
        if row["title_mention_share"] > 0:
            row["title_mention"] = titles_split(train_ds, keep, {"title_mention": {}}).recall("iso")["recall@5"]
            both = titles_split(train_ds, keep, {"title_mention": {}, "entity_graph": {}})
            row["with_entities"] = both.recall("iso")["recall@5"]
            row["with_entities_reentry"] = both.recall("iso", reenter_entity_seeds=True)["recall@5"]
            row["with_entities_no_unique_mentions"] = both.recall("iso", unique_mention_seeds=False)["recall@5"]
        titles.append(row)
    split = titles_split(train_ds, 0.0, GRAPHS["entity_graph"])
    seeds = {str(share): split.recall("iso", entity_seeds=share)["recall@5"] for share in ENTITY_SEED_SHARES}
    return {"titles": titles, "entity_seeds": seeds, "entity_graph_reentry": split.recall("iso", reenter_entity_seeds=True)["recall@5"],
            "entity_graph_no_unique_mentions": split.recall("iso", unique_mention_seeds=False)["recall@5"],
            "weighting": weighting_study(train_ds)}


def weighting_study(train_ds: QADataset) -> list[dict[str, Any]]:
    """On TRAINING questions with blank titles: Recall@5 of ISO-RAG (hops 2, the walk following
    the mention weights where there are any) per builder ``idf_power`` and per setting of
    :data:`WEIGHTING_GRID`, and of global PPR with and without the weights."""
    rows = []
    for power in IDF_POWERS:
        split = titles_split(train_ds, 0.0, {"entity_graph": {"idf_power": power}})
        weighted = power > 0
        ppr = {str(w): split.recall("ppr", edge_weights=w)["recall@5"] for w in (False, True)}
        for setting in settings(WEIGHTING_GRID):
            rows.append({"idf_power": power, "edge_weights": weighted, **setting, "ppr": ppr,
                         "iso": split.recall("iso", hops=2, edge_weights=weighted, **setting)["recall@5"]})
    return rows


def weighting_choice(study: dict[str, Any]) -> dict[str, Any]:
    """The entity graph's defaults chosen on the training study: the ``idf_power`` and ISO-RAG
    setting with the best mean Recall@5 over the studied datasets (first in grid order on ties),
    and whether global PPR follows the weights (better mean at that ``idf_power``)."""
    tables = [dataset["weighting"] for dataset in study.values() if dataset.get("weighting")]
    if not tables:
        return {}
    mean = [sum(table[i]["iso"] for table in tables) / len(tables) for i in range(len(tables[0]))]
    best_row = max(range(len(mean)), key=lambda i: (mean[i], -i))
    row = tables[0][best_row]
    ppr = {w: sum(table[best_row]["ppr"][w] for table in tables) / len(tables) for w in ("False", "True")}
    knobs = [k for k in row if k in WEIGHTING_GRID or k == "lambda_dense"]  # settings() adds lambda_dense = 1 - lambda_graph
    return {"idf_power": row["idf_power"], "iso": {"hops": 2, "edge_weights": row["edge_weights"], **{k: row[k] for k in knobs}},
            "iso_mean_recall@5": mean[best_row], "ppr_edge_weights": ppr["True"] > ppr["False"], "ppr_mean_recall@5": ppr,
            "datasets": len(tables)}


def title_share_threshold(study: dict[str, Any]) -> dict[str, Any]:
    """The automatic graph's threshold, chosen on the training study: the rule "title mentions
    alone where they touch at least a share t of the passages, the entity graph added below t"
    is scored by its summed Recall@5 over the studied corpora; t is the middle of the run of
    share intervals ``(s_i, s_i+1]`` (between consecutive studied shares) with the best score."""
    points = sorted((row["title_mention_share"], row["title_mention"], row["with_entities"])
                    for dataset in study.values() for row in dataset["titles"] if row["title_mention_share"] > 0)
    if not points:
        return {}
    bounds = [0.0] + [share for share, _, _ in points] + [1.0]
    totals = [sum(alone if share >= bounds[i + 1] else both for share, alone, both in points) for i in range(len(bounds) - 1)]
    first = totals.index(max(totals))
    last = first
    while last + 1 < len(totals) and totals[last + 1] == totals[first]:
        last += 1
    return {"threshold": (bounds[first] + bounds[last + 1]) / 2, "interval": [bounds[first], bounds[last + 1]],
            "summed_recall@5": totals[first], "corpora": len(points)}


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
            "seconds": seconds, "cpu_seconds": cpu_seconds, "passages_per_second": len(corpus) / seconds,
            "passages_per_cpu_second": len(corpus) / cpu_seconds, "load_average": os.getloadavg()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["musique", "hotpotqa", "2wikimultihopqa"])
    parser.add_argument("--graphs", nargs="+", default=list(GRAPHS), choices=list(GRAPHS))
    parser.add_argument("--titles", nargs="+", default=["blank", "kept"], choices=["blank", "kept"])
    parser.add_argument("--train-questions", type=int, default=100, help="training questions the knobs are chosen on")
    parser.add_argument("--dev-questions", type=int, default=100, help="dev questions evaluated (the first ones)")
    parser.add_argument("--dev-passages", type=int, default=1200, help="corpus size where the dev file gives no contexts (2Wiki)")
    parser.add_argument("--out", type=results_name, default="blank_titles.json", help="results file under benchmarks/results/")
    parser.add_argument("--study", action="store_true", help="only the training-question study (train_study) per dataset")
    args = parser.parse_args()
    if min(args.train_questions, args.dev_questions, args.dev_passages) < 1:
        raise SystemExit("--train-questions, --dev-questions and --dev-passages must be >= 1")
    logging.basicConfig(level=logging.WARNING)
    results, timing = [], None
    for dataset in args.datasets:
        chosen = setup(f"dataset={dataset}")
        dev_ds, train_ds = chosen.dataset, chosen.train
        if args.study:
            study = train_study(question_subset(train_ds, args.train_questions, args.dev_passages)[0])
            print(f"{dataset} training study: {study}", flush=True)
            write_results(args.out, [], None, {dataset: study})
            continue
        if dataset == "2wikimultihopqa":
            timing = entity_graph_seconds(dev_ds.corpus)
            print(f"entity graph over the {timing['passages']} passages of 2Wiki's dev corpus: {timing['seconds']:.1f} s "
                  f"({timing['cpu_seconds']:.1f} s CPU)", flush=True)
        # what the automatic graph would see on the dataset's whole dev corpus, titles kept
        full_corpus = {"passages": len(dev_ds.corpus), "title_mention_share": title_mention_share(dev_ds.corpus)}
        dev_ds, dev_corpus = question_subset(dev_ds, args.dev_questions, args.dev_passages)
        train_ds, train_corpus = question_subset(train_ds, args.train_questions, args.dev_passages)
        for titles in args.titles:
            keep = float(titles == "kept")
            shown = blanked(dev_ds.corpus, keep)  # the dev corpus as every graph of these rows sees it
            share = title_mention_share(shown)
            for graph in args.graphs:
                if graph == "auto" and titles == "blank":
                    continue  # blank titles: the automatic graph is the entity graph alone
                start = time.perf_counter()
                # auto: the builders the dev corpus gets, for the training corpus too (the knobs are tuned on the graph they are tested on)
                spec = GRAPHS[graph] or auto_graph(shown)
                dev = titles_split(dev_ds, keep, spec)
                entry = evaluate(titles_split(train_ds, keep, spec), dev)
                entry = {"dataset": dataset, "titles": titles, "graph": graph, "builders": dev.index.statistics["builders"],
                         "title_mention_share": share, "dev": dev_corpus, "train": train_corpus, "seconds": time.perf_counter() - start, **entry}
                if titles == "kept":
                    entry["full_dev_corpus"] = full_corpus
                results.append(entry)
                r5 = {k: round(v["recall@5"], 3) for k, v in entry["metrics"].items()}
                print(f"{dataset} titles {titles} {graph}: {r5}", flush=True)
                write_results(args.out, results, timing)


def write_results(name: str, results: list[dict[str, Any]], timing: dict[str, Any] | None, study: dict[str, Any] | None = None) -> None:
    """Write ``results`` (and a dataset's training ``study``) into ``RESULTS/name``, keeping the
    entries of other (dataset, titles, graph) runs and studies already there (so datasets can run
    as separate processes into one file)."""
    path, key = RESULTS / name, (lambda e: (e["dataset"], e["titles"], e["graph"]))
    old = json.loads(path.read_text()) if path.is_file() else {}
    mine = {key(e) for e in results}
    merged = [e for e in old.get("results", []) if key(e) not in mine] + results
    write_json(name, {"split": "dev; knobs chosen on training questions (iso_tuned, ppr_tuned) or the index defaults (iso, ppr)",
                      "iso_grid": ISO_GRID, "ppr_grid": PPR_GRID, "entity_graph_2wiki": timing or old.get("entity_graph_2wiki"),
                      "train_study": (studies := {**old.get("train_study", {}), **(study or {})}),
                      "title_share_threshold": title_share_threshold(studies), "weighting_choice": weighting_choice(studies),
                      "results": merged})


if __name__ == "__main__":
    main()
