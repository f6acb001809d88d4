"""Profile of one server batch's query encoding, per backend, side by side: the tokenizer call and
the model's forward pass, per question, for a batch of ``--batch`` 2Wiki dev questions and for one
question at a time.

    python -m benchmarks.query_encoding [--backends torch onnx onnx-int8 openvino openvino-bf16] [--batch 64] [--rounds 5]

Writes benchmarks/results/query_encoding.json. Rounds alternate the backends' order; the machine
may be shared, so compare the ratios, not the absolute milliseconds.
"""
from __future__ import annotations

import argparse
import os
import time

import torch

from benchmarks.common import add_override_argument, setup, write_json
from isorag_pyg.encoders import SentenceEncoder
from isorag_pyg.encoders.backends import BACKENDS, tokenize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--batch", type=int, default=64, help="questions in the batch (default: 64, a server batch at 128 clients)")
    parser.add_argument("--rounds", type=int, default=5)
    add_override_argument(parser)
    args = parser.parse_args()
    questions = [q.text for q in setup("dataset=2wikimultihopqa", *args.override).dataset.questions][:args.batch]
    encoders = {b: SentenceEncoder(backend=b, cache_dir=None, show_progress=False, batch_size=args.batch) for b in args.backends}
    for encoder in encoders.values():
        encoder.encode(questions[:2])  # load, export, warm up
    model = encoders[args.backends[0]]._load()
    seconds = {b: {"batch": 0.0, "single": 0.0} for b in args.backends}
    tokenizer_s = 0.0
    for r in range(args.rounds):
        start = time.perf_counter()
        tokenize(model, questions)
        tokenizer_s += time.perf_counter() - start
        for b in args.backends if r % 2 == 0 else args.backends[::-1]:
            start = time.perf_counter()
            encoders[b].encode(questions)
            seconds[b]["batch"] += time.perf_counter() - start
            start = time.perf_counter()
            for question in questions[:8]:
                encoders[b].encode([question])
            seconds[b]["single"] += (time.perf_counter() - start) * len(questions) / 8
    per_question = lambda s: round(1000 * s / (args.rounds * len(questions)), 3)
    rows = {b: {"batched_ms_per_question": per_question(s["batch"]), "single_ms_per_question": per_question(s["single"]),
                "batched_ratio_vs_torch": round(seconds["torch"]["batch"] / s["batch"], 2) if "torch" in seconds else None}
            for b, s in seconds.items()}
    print(f"tokenizer: {per_question(tokenizer_s):.3f} ms/question in a batch of {len(questions)} ({torch.get_num_threads()} threads, "
          f"load {os.getloadavg()[0]:.1f})")
    for b, row in rows.items():
        print(f"{b:13s} batched {row['batched_ms_per_question']:7.2f} ms/q  one at a time {row['single_ms_per_question']:7.2f} ms/q  "
              f"batched {row['batched_ratio_vs_torch']}x torch")
    write_json("query_encoding.json", {"batch": len(questions), "rounds": args.rounds, "load_average": os.getloadavg(),
                                       "tokenizer_ms_per_question": per_question(tokenizer_s), "backends": rows})


if __name__ == "__main__":
    main()
