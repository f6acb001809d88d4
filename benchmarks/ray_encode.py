"""Passage encoding on Ray Data beside one process, on the same passages: wall seconds,
passages/s, and the largest difference between the two sets of embeddings.

    python -m benchmarks.ray_encode                                   # 2,000 2Wiki passages, 2 workers on this machine
    python -m benchmarks.ray_encode --passages 20000 --address auto --workers 8 --cpus-per-worker 4   # on a running cluster

One process: :class:`SentenceEncoder` with torch's threads (one per core). Ray: a
:class:`RayEncoder` with ``--workers`` actors of ``--cpus-per-worker`` CPUs each, on the cluster at
``--address`` or, without one, a Ray instance started on this machine (then its start-up is
included in the wall time, as it is for ``isorag index --ray``). No embedding cache either way.
Writes benchmarks/results/ray_encode.json (or ``--out``).
"""
from __future__ import annotations

import argparse
import json
import time

import torch

from benchmarks.common import DATA_DIR, results_name, write_json
from isorag_pyg.datasets.types import Passage
from isorag_pyg.encoders import SentenceEncoder
from isorag_pyg.scale import RayEncoder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=2000, help="the first N passages of the 2Wiki corpus")
    parser.add_argument("--address", default=None, help="a running Ray cluster (default: a Ray instance on this machine)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cpus-per-worker", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=256, help="passages per Ray batch")
    parser.add_argument("--out", type=results_name, default="ray_encode.json", help="file name under benchmarks/results/")
    args = parser.parse_args()
    if args.passages < 1 or args.workers < 1:
        parser.error("--passages and --workers must be >= 1")
    with open(f"{DATA_DIR}/2wikimultihopqa/corpus.json") as handle:
        records = json.load(handle)[: args.passages]
    texts = [Passage(str(i), r.get("title", ""), r["text"]).content for i, r in enumerate(records)]

    start = time.perf_counter()
    one = SentenceEncoder(cache_dir=None, show_progress=False, device="cpu").encode(texts)
    single_s = time.perf_counter() - start
    start = time.perf_counter()
    spread = RayEncoder(address=args.address, workers=args.workers, batch_size=args.batch_size, cpus_per_worker=args.cpus_per_worker,
                        cache_dir=None, device="cpu").encode(texts)
    ray_s = time.perf_counter() - start

    runs = {"one_process": {"torch_threads": torch.get_num_threads(), "seconds": single_s, "passages_per_s": len(texts) / single_s},
            "ray": {"address": args.address or "local instance", "workers": args.workers, "cpus_per_worker": args.cpus_per_worker,
                    "batch_size": args.batch_size, "seconds": ray_s, "passages_per_s": len(texts) / ray_s}}
    max_diff = float((spread - one).abs().max())
    print(f"{len(texts)} passages: one process {single_s:.1f} s ({runs['one_process']['passages_per_s']:.1f}/s), "
          f"Ray {args.workers} x {args.cpus_per_worker:g} CPU {ray_s:.1f} s ({runs['ray']['passages_per_s']:.1f}/s), "
          f"ratio {single_s / ray_s:.2f}, largest embedding difference {max_diff:.2e}")
    write_json(args.out, {"passages": len(texts), "corpus": "2wikimultihopqa corpus.json (first N)", "runs": runs,
                          "speedup": single_s / ray_s, "max_abs_embedding_difference": max_diff})


if __name__ == "__main__":
    main()
