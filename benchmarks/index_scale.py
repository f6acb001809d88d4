"""What an index costs: build, save, open and query it, on the 2Wiki corpus and a generated
million-passage corpus, each figure measured in this run.

    python -m benchmarks.index_scale [--passages 1000000] [--repeats 5]

* 2Wiki (6,119 passages, title-mention graph, f_θ 30 epochs): ``ISORAGIndex.build`` from cached
  embeddings (the first run embeds the corpus and fills the cache; that run is not timed), split
  into stages; ``save``; ``ISORAGIndex.load`` with checksums (median of ``--repeats``); and
  ``isorag query`` end to end in a fresh process (process start to printed answer, median of
  ``--repeats``), split into imports / index load / model load / retrieval.
* Generated: ``--passages`` passages with random unit 384-d embeddings, a Barabási-Albert graph
  (m = 5) and φ with p = 0, saved once; then opened in a fresh process (with and without
  checksums), reporting seconds and peak RSS.

Targets: 2Wiki build ≤ 30 s, load ≤ 1 s, query ≤ 10 s; a million passages open in ≤ 10 s and
≤ 2.5 GB RSS. Writes benchmarks/results/index_scale.json.
"""
from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO, setup, write_json

OPEN_SCRIPT = """
import json, re, sys, time
start = time.perf_counter()
from isorag_pyg.index import ISORAGIndex
imported = time.perf_counter()
index = ISORAGIndex.load(sys.argv[1], verify=sys.argv[2] == "verify")
opened = time.perf_counter()
# this process's own high-water mark (VmHWM); getrusage's ru_maxrss would include the parent's, carried across exec
peak_kib = int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
print(json.dumps({"imports_s": imported - start, "open_s": opened - imported, "passages": len(index),
                  "peak_rss_gb": peak_kib / 2**20}))
"""


def build_2wiki(repeats: int, out: Path) -> dict:
    from isorag_pyg.index import ISORAGIndex
    chosen = setup("dataset=2wikimultihopqa", "graph=title_mention", "trainer.enable_progress_bar=false", "+trainer.enable_model_summary=false")
    eval_ds, options = chosen.dataset, chosen.options
    encoder = options["encoder"]
    encoder.encode([p.content for p in eval_ds.corpus])  # fills the embedding cache (untimed)
    start = time.perf_counter()
    index = ISORAGIndex.build(eval_ds.corpus, **options, progress=False)
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    index.save(out)
    save_s = time.perf_counter() - start
    loads = []
    for _ in range(repeats):
        start = time.perf_counter()
        ISORAGIndex.load(out)
        loads.append(time.perf_counter() - start)
    question = eval_ds.questions[0].text
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "isorag_pyg.cli", "query", str(out), question, "-k", "5", "--timings"],
                              capture_output=True, text=True, check=True)
        wall = time.perf_counter() - start
        runs.append({"wall_s": wall, **json.loads(done.stderr.strip().splitlines()[-1])})
    median = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    row = {"passages": len(index), "edges": index.statistics["edges"], "build_s": build_s, "save_s": save_s,
           "f_theta_epochs": options["f_theta"].trainer["max_epochs"], "load_s_median": statistics.median(loads), "load_s_all": loads,
           "query_end_to_end_s_median": median["wall_s"], "query_split_median_s": median, "query_runs": runs,
           "index_bytes": sum(p.stat().st_size for p in out.iterdir())}
    print(f"2wiki: build {build_s:.1f} s (cached embeddings), save {save_s:.2f} s, load {row['load_s_median']:.3f} s (median of {repeats}), "
          f"`isorag query` {median['wall_s']:.2f} s end to end: imports {median['imports_s']:.2f}, load {median['load_s']:.3f}, "
          f"model {median['model_s']:.2f}, retrieval {median['retrieval_s']:.3f}", flush=True)
    return row


def generated_index(n: int, out: Path) -> dict:
    import igraph as ig
    import torch
    from torch_geometric.data import Data

    from isorag_pyg.datasets import Passage
    from isorag_pyg.graph import graph_statistics
    from isorag_pyg.index import ISORAGIndex, corpus_hash
    from isorag_pyg.knobs import PhiSpec
    from isorag_pyg.store.contents import IndexContents
    from isorag_pyg.store.passages import PassageStore
    from isorag_pyg.utils import log_phi_from_ball
    from isorag_pyg.utils.bridging import bridging_from_ball

    torch.manual_seed(0)
    start = time.perf_counter()
    edges = torch.tensor(ig.Graph.Barabasi(n, 5, directed=False).get_edgelist(), dtype=torch.long).t()
    edge_index = torch.cat([edges, edges.flip(0)], 1)
    order = torch.argsort(edge_index[0] * n + edge_index[1])
    edge_index = edge_index[:, order]
    x = torch.nn.functional.normalize(torch.randn(n, 384), dim=-1)
    passages = [Passage(str(i), f"Generated passage {i}", f"Generated passage number {i} of {n}, for the index scale benchmark.") for i in range(n)]
    graph = Data(x=x, edge_index=edge_index, edge_weight=torch.ones(edge_index.size(1)), edge_source=torch.ones(edge_index.size(1), dtype=torch.long),
                 num_nodes=n)
    graph.builders, graph.leak = ["generated"], False
    spec = PhiSpec(p=0.0)
    log_phi = log_phi_from_ball(edge_index, None, spec, num_nodes=n)
    bridging = bridging_from_ball(edge_index, None, spec, num_nodes=n)
    contents = IndexContents(PassageStore(passages), x, graph, log_phi, bridging, {**graph_statistics(graph), "builders": ["generated"]},
                             corpus_hash(passages))
    index = ISORAGIndex(contents=contents, encoder={"name": "random", "fingerprint": "none", "dim": 384}, phi=spec,
                        graph_spec={"generated": {"barabasi_m": 5}})
    made_s = time.perf_counter() - start
    start = time.perf_counter()
    index.save(out)
    save_s = time.perf_counter() - start
    del index, contents, passages, x, graph
    row = {"passages": n, "generate_s": made_s, "save_s": save_s, "index_bytes": sum(p.stat().st_size for p in out.iterdir())}
    for mode in ("verify", "no-verify"):
        opened = [json.loads(subprocess.run([sys.executable, "-c", OPEN_SCRIPT, str(out), mode], capture_output=True, text=True,
                                            check=True, cwd=REPO).stdout) for _ in range(3)]
        row[mode] = {"open_s_median": statistics.median(o["open_s"] for o in opened), "peak_rss_gb_max": max(o["peak_rss_gb"] for o in opened),
                     "runs": opened}
        print(f"generated {n}: open ({mode}) {row[mode]['open_s_median']:.2f} s median, peak RSS {row[mode]['peak_rss_gb_max']:.2f} GB", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="isorag-index-bench-") as tmp:
        wiki = build_2wiki(args.repeats, Path(tmp) / "2wiki")
        generated = generated_index(args.passages, Path(tmp) / "generated")
    targets = {"2wiki_build_s<=30": wiki["build_s"] <= 30, "2wiki_load_s<=1": wiki["load_s_median"] <= 1,
               "query_end_to_end_s<=10": wiki["query_end_to_end_s_median"] <= 10,
               "generated_open_s<=10": generated["verify"]["open_s_median"] <= 10,
               "generated_peak_rss_gb<=2.5": generated["verify"]["peak_rss_gb_max"] <= 2.5}
    print("targets: " + ", ".join(f"{k}: {'met' if v else 'NOT met'}" for k, v in targets.items()))
    write_json("index_scale.json", {"2wiki": wiki, "generated": generated, "targets": targets})


if __name__ == "__main__":
    main()
