"""A picture of one question's local graph: kept and pruned edges, seeds and gold passages (and an
entity graph's entity nodes, drawn as squares)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import igraph as ig
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def plot_case_study(trace: dict[str, Any], gold: set[int], titles: Any, question: str, path: str | Path,
                    num_passages: int | None = None) -> Path:
    """Draw ``trace`` (from ``ISORetriever.retrieve(..., trace=True)``) to a PNG at ``path``;
    ``titles[row]`` labels a node; rows from ``num_passages`` on are entity nodes (squares; the
    question's entity seeds outlined like the passage seeds)."""
    nodes = trace["candidates"]
    where = {n: i for i, n in enumerate(nodes)}
    kept = [(where[u], where[v]) for u, v in trace["kept_edges"]]
    pruned = [(where[u], where[v]) for u, v in trace["pruned_edges"]]
    layout = ig.Graph(n=len(nodes), edges=kept + pruned).layout_fruchterman_reingold(niter=500, seed=None)
    xy = layout.coords
    top = {n for n, _ in trace["top"]}
    seeds = set(trace["seeds"]) | set(trace.get("entity_seeds", []))
    entities = {n for n in nodes if num_passages is not None and n >= num_passages}
    fig, ax = plt.subplots(figsize=(11, 9))
    for edges, style in ((kept, {"color": "0.45", "lw": 1.0, "ls": "-"}), (pruned, {"color": "tab:red", "lw": 0.8, "ls": "--", "alpha": 0.7})):
        for u, v in edges:
            ax.plot([xy[u][0], xy[v][0]], [xy[u][1], xy[v][1]], zorder=1, **style)
    for i, n in enumerate(nodes):
        face = "gold" if n in gold else ("tab:blue" if n in top else ("tab:green" if n in entities else "0.85"))
        edge = "black" if n in seeds else "none"
        ax.scatter(*xy[i], s=160 if n in gold else 70, c=face, edgecolors=edge, linewidths=2, zorder=2, marker="s" if n in entities else "o")
        if n in gold or n in top or n in seeds:
            ax.annotate(titles[n][:28], xy[i], fontsize=7, xytext=(4, 4), textcoords="offset points")
    handles = [
        plt.Line2D([], [], color="0.45", label=f"kept edge ({len(kept)})"),
        plt.Line2D([], [], color="tab:red", ls="--", label=f"pruned edge ({len(pruned)})"),
        plt.Line2D([], [], marker="o", ls="", color="gold", markersize=10, label="gold passage"),
        plt.Line2D([], [], marker="o", ls="", color="tab:blue", label="retrieved (top-k)"),
        plt.Line2D([], [], marker="o", ls="", markerfacecolor="white", markeredgecolor="black", label="seed"),
    ]
    if entities:
        handles.append(plt.Line2D([], [], marker="s", ls="", color="tab:green", label=f"entity node ({len(entities)})"))
    ax.legend(handles=handles, loc="best", fontsize=8)
    ax.set_title(question[:110], fontsize=10)
    ax.set_axis_off()
    path = Path(path)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
