"""Adding 1% new passages to an index against rebuilding it, measured in one run.

    python -m benchmarks.update [--passages 100000] [--new-share 0.01] [--encoder-rate-sample 200]

The corpus is generated: passages titled with made-up names whose texts mention other titles
(one mention per passage drawn from a Zipf law, two uniformly: the title-mention graph has hubs). Encoding a
hundred thousand passages with the default encoder would take about an hour on this 2-core
machine, so the index is built with a stand-in encoder (hashed bag of words, 384-d, labelled as
such in the JSON) for both paths; the time the default encoder would add is reported apart, from
its rate measured here on ``--encoder-rate-sample`` passages: an update encodes only the new
passages, a rebuild all of them (the embedding cache is keyed by the whole corpus).

Both paths use the same f_θ (trained one epoch on the base graph: its cost is not compared) and
end with an atomic save. The updated index is checked against the rebuild (graph and φ).
Writes benchmarks/results/update.json.
"""
from __future__ import annotations

import argparse
import hashlib
import logging
import random
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.common import write_json
from isorag_pyg import FThetaConfig, ISORAGIndex, PhiSpec
from isorag_pyg.datasets import Passage
from isorag_pyg.encoders import SentenceEncoder


class HashingEncoder:
    """A stand-in encoder: L2-normalised sums of random vectors keyed by word hashes (fast, not semantic)."""

    name, fingerprint = "hashing-bag-of-words-384", "hashing-bag-of-words-384"

    def __init__(self, dim: int = 384):
        self.dim = dim
        self.vectors: dict[str, torch.Tensor] = {}

    def word(self, word: str) -> torch.Tensor:
        if word not in self.vectors:
            seed = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little") % (1 << 63)
            self.vectors[word] = torch.randn(self.dim, generator=torch.Generator().manual_seed(seed))
        return self.vectors[word]

    def encode(self, texts: list[str]) -> torch.Tensor:
        out = torch.stack([torch.stack([self.word(w) for w in text.lower().split()]).sum(0) for text in texts])
        return torch.nn.functional.normalize(out, dim=-1)


def generated_passages(n: int, seed: int = 0) -> list[Passage]:
    rng = random.Random(seed)
    syllables = ["ka", "lo", "mi", "ren", "sa", "tor", "vi", "zen", "bra", "dul", "fe", "gro", "hal", "ix", "jun", "pra"]
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < n:
        name = "".join(rng.choice(syllables) for _ in range(rng.randint(3, 4))).capitalize() + f" {rng.choice(syllables).capitalize()}"
        if name not in seen:
            seen.add(name)
            names.append(name)
    weights = [1.0 / (i + 1) for i in range(n)]  # Zipf: early names are mentioned very often
    popular = rng.choices(range(n), weights=weights, k=n)
    passages = []
    for i, name in enumerate(names):
        mentioned = {popular[i], rng.randrange(n), rng.randrange(n)}  # one popular name, two random ones
        text = f"{name} is a subject of this generated corpus. " + " ".join(f"It is related to {names[m]}." for m in sorted(mentioned) if m != i)
        passages.append(Passage(str(i), name, text))
    return passages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--new-share", type=float, default=0.01)
    parser.add_argument("--encoder-rate-sample", type=int, default=200)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    total = generated_passages(int(args.passages * (1 + args.new_share)))
    base, new = total[: args.passages], total[args.passages :]
    encoder = HashingEncoder()
    f_theta = FThetaConfig(trainer={"max_epochs": 1, "enable_progress_bar": False, "enable_model_summary": False})
    with tempfile.TemporaryDirectory(prefix="isorag-update-bench-") as tmp:
        index = ISORAGIndex.build(base, encoder=encoder, f_theta=f_theta, phi=PhiSpec(), progress=False)
        index.save(Path(tmp) / "index")
        start = time.perf_counter()
        report = index.add(new, encoder=encoder)
        add_s = time.perf_counter() - start
        start = time.perf_counter()
        index.save(Path(tmp) / "index")
        add_save_s = time.perf_counter() - start
        start = time.perf_counter()
        rebuilt = ISORAGIndex.build(total, encoder=encoder, f_theta=index.f_theta, phi=index.phi, progress=False)
        rebuild_s = time.perf_counter() - start
        start = time.perf_counter()
        rebuilt.save(Path(tmp) / "rebuilt")
        rebuild_save_s = time.perf_counter() - start
    same_graph = torch.equal(index.graph.edge_index, rebuilt.graph.edge_index)
    phi_gap = float((index.log_phi - rebuilt.log_phi).abs().nan_to_num(0.0).max())
    sample = [p.content for p in total[: args.encoder_rate_sample]]
    minilm = SentenceEncoder(cache_dir=None, show_progress=False)
    minilm.encode(sample[:8])  # load the model
    start = time.perf_counter()
    minilm.encode(sample)
    rate = len(sample) / (time.perf_counter() - start)
    row = {
        "passages": args.passages, "new_passages": len(new), "edges_after": index.statistics["edges"],
        "stand_in_encoder": encoder.name, "add_s": add_s, "add_save_s": add_save_s, "rebuild_s": rebuild_s, "rebuild_save_s": rebuild_save_s,
        "rebuild_over_add": (rebuild_s + rebuild_save_s) / (add_s + add_save_s), "report": vars(report),
        "equals_rebuild": {"edge_index": same_graph, "max_abs_log_phi_gap": phi_gap},
        "default_encoder_passages_per_s": rate,
        "with_default_encoder_s": {"add": add_s + add_save_s + len(new) / rate, "rebuild": rebuild_s + rebuild_save_s + len(total) / rate},
    }
    print(f"{args.passages} passages + {len(new)} new: add {add_s:.1f} s + save {add_save_s:.1f} s; rebuild {rebuild_s:.1f} s + save "
          f"{rebuild_save_s:.1f} s (x{row['rebuild_over_add']:.1f}); φ recomputed for {report.phi_recomputed} graph nodes; same graph as "
          f"the rebuild: {same_graph}, largest |Δ log φ| {phi_gap:.2e}. With the default encoder ({rate:.0f} passages/s here): "
          f"add {row['with_default_encoder_s']['add']:.0f} s, rebuild {row['with_default_encoder_s']['rebuild']:.0f} s", flush=True)
    write_json("update.json", row)


if __name__ == "__main__":
    main()
