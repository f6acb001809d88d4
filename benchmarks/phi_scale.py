"""Time and peak memory of the isoperimetric profile φ on generated scale-free graphs.

    python -m benchmarks.phi_scale [--nodes 10000 100000 1000000] [--m 5]

Each size runs in a fresh subprocess (so peak RSS is that size's own), on a Barabási-Albert
graph with ``m`` edges per new node (1M nodes, m=5: 5M undirected = 10M directed edges).
Writes benchmarks/results/phi_scale.json.
"""
from __future__ import annotations

import argparse
import itertools
import json
import resource
import subprocess
import sys
import time


def one(n: int, m: int) -> dict:
    import random

    import igraph as ig
    import torch

    from isorag_pyg.utils import (
        log_isoperimetric_profile,
        log_volume,
        two_hop_shell_pairs,
    )
    from isorag_pyg.utils.isoperimetric import clean_edge_index

    random.seed(0)  # igraph draws from Python's random module
    torch.manual_seed(0)
    g = ig.Graph.Barabasi(n, m, directed=False)
    ei = torch.tensor(g.get_edgelist(), dtype=torch.long).t()
    ei = torch.cat([ei, ei.flip(0)], dim=1)
    z = torch.nn.functional.normalize(torch.randn(n, 16), dim=-1) * torch.rand(n, 1) * 0.99
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    log_phi = log_isoperimetric_profile(ei, log_volume(z, p=2.0), shell_floor=0.0)
    seconds = time.perf_counter() - start
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    clean = clean_edge_index(ei, n)
    deg = torch.bincount(clean[0], minlength=n)
    two_paths = int((deg[clean[1]]).sum())
    pairs = sum(u.numel() for u, _ in two_hop_shell_pairs(clean, n))
    return {"nodes": n, "directed_edges": int(ei.size(1)), "two_hop_paths": two_paths, "two_hop_pairs": pairs,
            "seconds": seconds, "peak_rss_mib": peak_mib, "rss_before_mib": rss_before / 1024,
            "ns_per_two_hop_path": 1e9 * seconds / max(1, two_paths), "finite_share": float(torch.isfinite(log_phi).float().mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", nargs="+", type=int, default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--m", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one(args.nodes[0], args.m)))
        return
    from benchmarks.common import REPO, write_json  # not in the measured children

    rows = []
    for n in args.nodes:
        out = subprocess.run([sys.executable, "-m", "benchmarks.phi_scale", "--child", "--nodes", str(n), "--m", str(args.m)], check=True,
                             capture_output=True, text=True, cwd=REPO)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"{n:>9} nodes {row['directed_edges']:>10} edges  {row['two_hop_paths']:>12} 2-paths  {row['two_hop_pairs']:>12} 2-hop pairs  "
              f"{row['seconds']:8.2f} s  peak {row['peak_rss_mib']:8.0f} MiB  {row['ns_per_two_hop_path']:.1f} ns/2-path", flush=True)
    for a, b in itertools.pairwise(rows):
        print(f"x{b['nodes'] / a['nodes']:.0f} nodes: time x{b['seconds'] / a['seconds']:.1f}, 2-paths x{b['two_hop_paths'] / a['two_hop_paths']:.1f}")
    write_json("phi_scale.json", {"graph": f"Barabasi-Albert m={args.m}", "p": 2.0, "rows": rows})


if __name__ == "__main__":
    main()
