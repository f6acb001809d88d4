r"""How ISO-RAG scores passages, in one place: the teleport softmax over each question's seeds,
personalized PageRank on the (filtered) local graphs, per-question min-max and the λ fusion

.. math::
    \mathrm{score}(v) = \lambda_g\,\mathrm{minmax}(\pi)_v + \lambda_d\,\mathrm{minmax}(s)_v,
    \qquad \pi = \mathrm{PPR}_\alpha\big(r\big),\quad r = \mathrm{softmax}(\tau\, s_{\mathrm{seeds}}),

(on an entity graph with query-matched entity seeds, ``r`` gives those seeds the share
``entity_seeds`` by inverse degree and the passage seeds the rest of it, each such seed passes its
mass to the passages that mention it in proportion to ``exp(entity_focus * s)``, a passage keeping
at most ``exp(entity_gate * (s - the best seed's s))`` of it (the rest restarts), and unless
``reenter_entity_seeds`` the walk leaves out the edges into those seeds),
used by :class:`~isorag_pyg.retrieval.ISORetriever` and PyG's subgraph filter alike; and the
helpers around it: dense scoring in query chunks (never an N x N matrix), per-segment and per-row
min-max, per-segment top-k.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from isorag_pyg.knobs import ISOKnobs
from isorag_pyg.utils.ppr import personalized_pagerank

#: Query-by-passage score entries held at once (2**26 floats = 256 MiB).
SCORE_BUDGET = 1 << 26


def query_chunk_size(num_passages: int, requested: int | None = None) -> int:
    """Queries per chunk so that a ``[chunk, N]`` score block fits :data:`SCORE_BUDGET`."""
    fit = max(1, SCORE_BUDGET // max(1, num_passages))
    return min(requested, fit) if requested else min(1024, fit)


def _unit_scale(values: Tensor, lo: Tensor, hi: Tensor) -> Tensor:
    """``(values - lo) / (hi - lo)``; 0 where ``hi == lo``."""
    span = hi - lo
    return torch.where(span > 0, (values - lo) / span.clamp_min(torch.finfo(values.dtype).tiny), torch.zeros_like(values))


def segment_ptr(batch: Tensor, num_groups: int) -> Tensor:
    """Offsets of ``num_groups`` consecutive groups in a sorted ``batch`` vector."""
    counts = torch.bincount(batch, minlength=num_groups)
    return torch.cat([counts.new_zeros(1), counts.cumsum(0)])


def segment_minmax(values: Tensor, segment: Tensor, ptr: Tensor) -> Tensor:
    """Min-max scale ``values`` (``[M]`` or ``[M, C]``, each column on its own) within each
    contiguous segment (``segment`` sorted, offsets ``ptr``) to [0, 1]; constant segments become 0."""
    lengths = ptr[1:] - ptr[:-1]
    lo = torch.segment_reduce(values, "min", lengths=lengths, axis=0)[segment]
    hi = torch.segment_reduce(values, "max", lengths=lengths, axis=0)[segment]
    return _unit_scale(values, lo, hi)


def row_minmax(values: Tensor) -> Tensor:
    """Min-max scale every row of ``[Q, N]`` ``values`` to [0, 1]; constant rows become 0."""
    return _unit_scale(values, values.min(dim=1, keepdim=True).values, values.max(dim=1, keepdim=True).values)


def segment_topk(values: Tensor, segment: Tensor, ptr: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Top-``k`` positions (into ``values``) and values per segment; segments shorter than
    ``k`` are padded with position ``-1`` and value ``-inf``."""
    num_segments = ptr.numel() - 1
    sizes = ptr[1:] - ptr[:-1]
    width = max(int(sizes.max()) if num_segments else 0, k)
    dense = values.new_full((num_segments, width), float("-inf"))
    slot = torch.arange(values.numel(), device=values.device) - ptr[segment]
    dense[segment, slot] = values
    top_values, top_slots = dense.topk(k, dim=1)
    positions = top_slots + ptr[:-1].unsqueeze(1)
    valid = top_slots < sizes.unsqueeze(1)
    return torch.where(valid, positions, torch.full_like(positions, -1)), top_values


def fuse(graph: Tensor, dense: Tensor, lambda_graph: float, lambda_dense: float) -> Tensor:
    """The fusion ``lambda_graph * graph + lambda_dense * dense`` of min-max scaled graph (PPR) and
    dense (cosine) scores: ISO-RAG's and global PPR's ranking score."""
    return lambda_graph * graph + lambda_dense * dense


def teleport_weights(seed_scores: Tensor, tau: float) -> Tensor:
    """``softmax(tau * s)`` over each query's seeds (``[Q, m]``); uniform where that is not finite."""
    weights = torch.softmax(tau * seed_scores, dim=1)
    bad = ~torch.isfinite(weights).all(dim=1)
    weights[bad] = 1.0 / seed_scores.size(1)
    return weights


def _without_edges_into(nodes: Tensor, edge_index: Tensor, num_nodes: int, *aligned: Tensor | None) -> tuple[Tensor | None, ...]:
    """``edge_index`` (and the per-edge tensors ``aligned`` with it) without the edges whose target is one of ``nodes``."""
    target = torch.zeros(num_nodes, dtype=torch.bool, device=edge_index.device)
    target[nodes] = True
    keep = ~target[edge_index[1]]
    return edge_index[:, keep], *(None if values is None else values[keep] for values in aligned)


def edges_from_into_passages(sources: Tensor, edge_index: Tensor, ranked: Tensor) -> Tensor:
    """``[E]`` bool: the edges of ``edge_index`` from a node of ``sources`` into a passage (``ranked`` node)."""
    is_source = torch.zeros(ranked.numel(), dtype=torch.bool, device=ranked.device)
    is_source[sources] = True
    return is_source[edge_index[0]] & ranked[edge_index[1]]


def focus_edges_from(sources: Tensor, edge_index: Tensor, edge_weight: Tensor | None, dense: Tensor, ranked: Tensor,
                     focus: float) -> Tensor:
    """Edge weights under which each node of ``sources`` splits the weight of its edges into
    passages (``ranked`` nodes) in proportion to ``exp(focus * dense)`` of their targets, its
    total to passages unchanged; every other edge keeps its weight (``edge_weight``, default 1).

    An entity the question names is mentioned by its own passage and by any passage that merely
    names it (a list, a citation, an injected passage naming the entities of many questions): its
    mass goes mostly to those that read like the question.

    Example:
        >>> ei = torch.tensor([[0, 0, 0], [1, 2, 3]])  # entity 0 -> passages 1, 2 and entity 3
        >>> w = focus_edges_from(torch.tensor([0]), ei, None, torch.tensor([0.0, 0.6, 0.4, 0.0]),
        ...                      torch.tensor([False, True, True, False]), focus=10.0)
        >>> [round(x, 3) for x in w.tolist()]
        [1.762, 0.238, 1.0]
    """
    weight = torch.ones(edge_index.size(1), device=dense.device) if edge_weight is None else edge_weight.float()
    src, dst = edge_index
    chosen = edges_from_into_passages(sources, edge_index, ranked).nonzero().squeeze(1)
    if not chosen.numel():
        return weight
    s, v, w = src[chosen], dense[dst[chosen]].double(), weight[chosen].double()
    top = torch.full_like(dense, float("-inf"), dtype=torch.float64).scatter_reduce_(0, s, v, "amax")
    raised = w * torch.exp(focus * (v - top[s]))
    total = torch.zeros_like(top).index_add_(0, s, w)
    raised_total = torch.zeros_like(top).index_add_(0, s, raised)
    weight = weight.clone()
    weight[chosen] = (raised * total[s] / raised_total[s]).to(weight.dtype)
    return weight


def entity_gate_shares(dense: Tensor, seed_scores: Tensor, batch: Tensor, slope: float) -> Tensor:
    """``[M]`` the share of a query-matched entity's mass that each node keeps:
    ``exp(slope * (cosine - best seed cosine of its question))``, at most 1.

    The question names an entity; whoever wrote a passage chose the names in it. A passage that
    reads as close to the question as its best seed gets an entity's mass in full; one that only
    names the entity (an injected passage naming the entities of many questions) keeps a share
    that shrinks with its distance from the question, the rest restarting at the seeds.

    Example:
        >>> g = entity_gate_shares(torch.tensor([0.7, 0.6, 0.4]), torch.tensor([[0.6, 0.5]]), torch.zeros(3, dtype=torch.long), 10.0)
        >>> [round(x, 3) for x in g.tolist()]
        [1.0, 1.0, 0.135]
    """
    best = seed_scores.amax(dim=1)
    return torch.exp(slope * (dense - best[batch])).clamp(max=1.0)


def gate_edges_from(sources: Tensor, edge_index: Tensor, edge_follow: Tensor | None, ranked: Tensor, gate: Tensor) -> Tensor:
    """``edge_follow`` (default all 1) with each edge from a node of ``sources`` into a passage
    (``ranked`` node) followed only at its target's ``gate`` share (:func:`entity_gate_shares`); the
    rest of that transition restarts at the seeds."""
    follow = torch.ones(edge_index.size(1), device=gate.device) if edge_follow is None else edge_follow.float()
    return torch.where(edges_from_into_passages(sources, edge_index, ranked), follow * gate[edge_index[1]], follow)


@dataclass
class LocalScores:
    """Every local node's PPR mass and fused score, and the PPR iterations run."""

    pi: Tensor  # [M]
    score: Tensor  # [M]
    iterations: int


def score_local_graphs(edge_index: Tensor, seed_pos: Tensor, seed_scores: Tensor, dense: Tensor, batch: Tensor, ptr: Tensor,
                       knobs: ISOKnobs, edge_weight: Tensor | None = None, ranked: Tensor | None = None,
                       entity_pos: Tensor | None = None, entity_weight: Tensor | None = None,
                       edge_follow: Tensor | None = None, entity_vouched: Tensor | None = None) -> LocalScores:
    """ISO-RAG's score of every node of a block-diagonal batch of local graphs (the formula above).

    Args:
        edge_index: ``[2, E]`` the kept local edges (both directions), node positions.
        seed_pos, seed_scores: ``[Q, m]`` each question's seeds (positions) and their cosines.
        dense: ``[M]`` every node's cosine with its question.
        batch, ptr: the question of every node (sorted) and the node offsets per question.
        knobs: ``tau``, ``alpha``, ``tol``, ``max_iter``, ``lambda_graph``, ``lambda_dense``.
        edge_weight: ``[E]`` weights the walk follows (default: unweighted).
        ranked: ``[M]`` bool, the nodes that are ranked (passages; an entity graph's entity
            nodes carry PPR mass, not answers): min-max runs over them, the rest score ``-inf``
            (default: every node).
        entity_pos, entity_weight: ``[S]`` query-matched entity seeds (positions) and their
            relative weights: together they get the share ``knobs.entity_seeds`` of their
            question's teleport mass, in proportion to ``entity_weight`` (default: none); a
            passage among them (``ranked``) is one seeded for an entity only it mentions. Unless
            ``knobs.reenter_entity_seeds``, the edges into the entity nodes among them are left
            out of the walk (their edges out stay); with ``knobs.entity_gate`` a passage follows
            their edges into it only at its :func:`entity_gate_shares` share.
        edge_follow: ``[E]`` the share of each edge's transition the walk takes, the rest going
            back through the teleport (:func:`~isorag_pyg.utils.ppr.personalized_pagerank`;
            ISO-RAG's ``backlink_weight`` on one-way mentions walked backwards; default: all).
        entity_vouched: ``[S]`` bool, the entity seeds that keep their teleport mass; the others'
            goes back to the passage seeds (ISO-RAG's ``vouch_share`` / ``unique_mentions_vouched``; default: all keep it).
    """
    teleport = torch.zeros(dense.numel(), device=dense.device)
    passage_mass = teleport_weights(seed_scores, knobs.tau)
    if entity_pos is not None and entity_pos.numel() and knobs.entity_seeds > 0:
        if ranked is not None:  # the entity nodes among the seeds (without ``ranked`` every node is a passage)
            named = entity_pos[~ranked[entity_pos]]
            if not knobs.reenter_entity_seeds:
                edge_index, edge_weight, edge_follow = _without_edges_into(named, edge_index, dense.numel(), edge_weight, edge_follow)
            if knobs.entity_focus > 0:
                edge_weight = focus_edges_from(named, edge_index, edge_weight, dense, ranked, knobs.entity_focus)
            if knobs.entity_gate > 0 and named.numel():
                gate = entity_gate_shares(dense, seed_scores, batch, knobs.entity_gate)
                edge_follow = gate_edges_from(named, edge_index, edge_follow, ranked, gate)
        question = batch[entity_pos]
        total = torch.zeros(seed_scores.size(0), device=dense.device).index_add_(0, question, entity_weight.float())
        share = torch.where(total > 0, knobs.entity_seeds, 0.0)
        mass = share[question] * entity_weight.float() / total[question].clamp_min(1e-12)
        if entity_vouched is not None:  # the mass of the seeds not vouched for goes back to the passage seeds
            share = share - torch.zeros_like(share).index_add_(0, question, torch.where(entity_vouched, 0.0, mass))
            mass = torch.where(entity_vouched, mass, 0.0)
        passage_mass = passage_mass * (1 - share).unsqueeze(1)
        teleport.index_add_(0, entity_pos, mass)
    teleport.index_add_(0, seed_pos.reshape(-1), passage_mass.reshape(-1))  # added: a passage seed may also be seeded for a unique mention
    ppr = personalized_pagerank(edge_index, teleport, knobs.alpha, batch, ptr.numel() - 1, knobs.tol, knobs.max_iter, edge_weight,
                                edge_follow)
    pi = ppr.pi.squeeze(1)
    if ranked is None:
        scaled = segment_minmax(torch.stack([pi, dense], 1), batch, ptr)
        return LocalScores(pi, fuse(scaled[:, 0], scaled[:, 1], knobs.lambda_graph, knobs.lambda_dense), ppr.iterations)
    rows = ranked.nonzero().squeeze(1)
    scaled = segment_minmax(torch.stack([pi[rows], dense[rows]], 1), batch[rows], segment_ptr(batch[rows], ptr.numel() - 1))
    score = torch.full_like(pi, float("-inf"))
    score[rows] = fuse(scaled[:, 0], scaled[:, 1], knobs.lambda_graph, knobs.lambda_dense)
    return LocalScores(pi, score, ppr.iterations)
