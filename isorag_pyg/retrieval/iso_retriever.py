"""ISO-RAG retrieval: seeds -> local graph -> isoperimetric filter -> local PPR -> fusion."""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from isorag_pyg.knobs import ISOKnobs
from isorag_pyg.retrieval.ann import ANNIndex
from isorag_pyg.retrieval.candidates import DenseCandidates, candidate_chunk, check_ann_index, dense_candidates
from isorag_pyg.retrieval.hybrid import hybrid_ranking
from isorag_pyg.retrieval.local_graph import LocalGraphBatch, build_local_graphs
from isorag_pyg.retrieval.retrieval_graph import RetrievalGraph
from isorag_pyg.retrieval.scoring import score_local_graphs, segment_topk
from isorag_pyg.retrieval.types import Queries, RetrievalResult, Retriever, check_k, retrieve_in_chunks
from isorag_pyg.utils.bridging import bridge_mask
from isorag_pyg.utils.isoperimetric import ablate_log_phi, isoperimetric_keep_mask
from isorag_pyg.utils.near_duplicates import near_duplicates_last

#: With ``near_duplicate_cosine``, the near-duplicates of the best ``NEAR_DUPLICATE_WINDOW * k``
#: candidates make way for the next of them.
NEAR_DUPLICATE_WINDOW = 4
#: Memory for the near-duplicate test of one block of queries (their vectors and cosines).
NEAR_DUPLICATE_BLOCK_BYTES = 64 * 2**20
#: A title that more than this share of the corpus's passages name is generic (a common word, a
#: year: "July (disambiguation)" is named wherever "July" is): a seed naming it does not bring a
#: bridge back into the walk.
GENERIC_TITLE_SHARE = 0.01


def specifically_named(graph: RetrievalGraph) -> Tensor:
    """``[N]`` bool, the passages whose title some passages, but at most the share
    :data:`GENERIC_TITLE_SHARE` of them, name (:meth:`~RetrievalGraph.times_named`)."""
    named = graph.times_named()
    return (named > 0) & (named <= GENERIC_TITLE_SHARE * graph.num_passages)


class ISORetriever:
    """ISO-RAG over a corpus graph.

    Per query: cosine seeds (top ``num_seeds``) and a dense pool of ``L = over_retrieval * k``
    (from the exact scan, or from ``ann``: then the dense scores used below are dot products
    with just the passages concerned);
    the local graph is the pool plus the ``hops``-hop neighbourhood of the seeds (at most
    ``max_expansion`` new nodes per hop, best dense score first); edges whose endpoints'
    isoperimetric profiles differ by more than ``beta`` are removed (the rule of
    :class:`~isorag_pyg.transforms.IsoperimetricFilter`, decided once per corpus edge since φ is
    precomputed per node), and so are the edges of the passages left out of the walk (the
    ``bridge_share`` with the highest ``bridging`` scores, and the ``quarantined``; a bridge one of
    the question's seeds names by a specific title, :meth:`walk_left_out`, is walked for that
    question); what is left is scored by
    :func:`~isorag_pyg.retrieval.scoring.score_local_graphs`: personalized PageRank with
    teleport ``softmax(tau * s_dense)`` over the seeds, then
    ``lambda_graph * minmax(pi) + lambda_dense * minmax(s_dense)`` over the candidates. Where the
    graph records one-way mentions (``edge_backlink``), the walk follows them backwards with the
    share ``backlink_weight`` of their transition probability, the rest restarting at the seeds.
    On an entity graph, with ``entity_matcher`` and the knob ``entity_seeds > 0``, the entity
    nodes a question mentions, and the passages that alone mention an entity it names (unique
    mentions), are seeds too: they join the local graph (and its expansion) and get the share
    ``entity_seeds`` of the teleport mass, in inverse proportion to their degree (1 for a unique
    mention; a passage among the ``vouch_share`` strongest bridges, or any with the knob
    ``unique_mentions_vouched``, only where :meth:`vouched`, the rest going to the passage seeds);
    unless the knob ``reenter_entity_seeds``, the walk leaves out the edges into the entity nodes
    among them (traces and ``removed_edges`` report the isoperimetric filter's
    pruning only).

    All queries of a chunk run together: their local graphs form one block-diagonal batch, so
    every PPR iteration is a single sparse matmul (on ``device``, CPU or CUDA).

    The knobs and their defaults are :class:`~isorag_pyg.knobs.ISOKnobs` (keyword arguments
    change single ones).

    Args:
        graph: the corpus graph and passage embeddings, prepared for retrieval.
        log_phi: ``[N]`` precomputed log isoperimetric profile of every passage
            (:func:`~isorag_pyg.utils.log_phi_from_ball`).
        knobs: the knobs (default: :class:`~isorag_pyg.knobs.ISOKnobs`'s).
        ann: an approximate nearest-neighbour index over ``graph``'s embeddings for the pool and
            seeds (default: ``None``, the exact scan).
        entity_matcher: questions -> the rows each names: entity nodes and unique-mention
            passages (:class:`~isorag_pyg.graph.query_entities.QueryEntityMatcher`; default:
            ``None``, passage seeds only).
        bridging: ``[N]`` every node's bridging score (:func:`~isorag_pyg.utils.bridging.bridging_score`):
            the ``bridge_share`` of passages with the highest are left out of the walk (default:
            ``None``, none).
        quarantined: ``[N]`` bool, passages left out of the walk whatever their score (default: none).
        **changes: knobs changed from ``knobs`` (e.g. ``beta=0.1``).
    """

    name = "iso"

    def __init__(self, graph: RetrievalGraph, log_phi: Tensor, knobs: ISOKnobs = ISOKnobs(), ann: ANNIndex | None = None,
                 entity_matcher: Callable[[Sequence[str]], list[list[int]]] | None = None, bridging: Tensor | None = None,
                 quarantined: Tensor | None = None, lexical: Retriever | None = None, **changes: Any):
        self.knobs = knobs = knobs.replace(**changes)
        self.graph = graph
        if log_phi.numel() != graph.num_nodes:
            raise ValueError(f"log_phi has {log_phi.numel()} values for {graph.num_nodes} passages")
        self.log_phi = ablate_log_phi(log_phi.to(graph.device), knobs.phi_mode, knobs.seed)
        if knobs.edge_weights:
            graph.require_edge_weight()
        # φ is per node, so whether an edge survives the filter does not depend on the query:
        # decide it once for every corpus edge, then look it up for each local subgraph (below, the
        # edges of the passages left out for every question are taken out of it too)
        self.edge_keep = isoperimetric_keep_mask(self.graph.up_edge_index, self.log_phi, knobs.beta)
        # passages the walk leaves out: the strongest bridges (scores ablated as φ is) and the quarantined;
        # a bridge whose specific title one of a question's seeds names is walked for that question
        self.left_out = torch.zeros(graph.num_nodes, dtype=torch.bool, device=graph.device)
        self.named_bridge = torch.zeros(graph.num_nodes, dtype=torch.bool, device=graph.device)
        # passages whose unique-mention seeds must be vouched for: every one, or the strongest bridges
        self.needs_voucher = (torch.arange(graph.num_nodes, device=graph.device) < graph.num_passages) & knobs.unique_mentions_vouched
        if bridging is not None:
            bridging = ablate_log_phi(bridging.to(graph.device), knobs.phi_mode, knobs.seed)
            self.needs_voucher |= bridge_mask(bridging, knobs.vouch_share, graph.num_passages)
            bridges = bridge_mask(bridging, knobs.bridge_share, graph.num_passages)
            self.left_out |= bridges
            self.named_bridge = bridges & specifically_named(graph)
        if quarantined is not None:
            self.left_out |= quarantined.to(graph.device)
            self.named_bridge &= ~quarantined.to(graph.device)
        # the passages left out for every question lose their edges once, here; a named bridge's
        # edges are decided per question (:meth:`named_bridges_walked`)
        always_left_out = self.left_out & ~self.named_bridge
        up = self.graph.up_edge_index
        self.edge_keep &= ~(always_left_out[up[0]] | always_left_out[up[1]])
        check_ann_index(ann, graph)
        self.ann = ann
        self.entity_matcher = entity_matcher if knobs.entity_seeds > 0 and graph.num_passages < graph.num_nodes else None
        if knobs.lexical_weight > 0 and lexical is None:
            raise ValueError("lexical_weight > 0 needs the lexical retriever (BM25) it fuses")
        self.lexical = lexical if knobs.lexical_weight > 0 else None
        self.quarantined = torch.zeros(graph.num_nodes, dtype=torch.bool) if quarantined is None else quarantined.cpu()

    def sizes(self, k: int) -> tuple[int, int, int]:
        """(k, pool size L, seeds m), clipped to the corpus."""
        n = self.graph.num_passages
        k = check_k(k, n)
        pool = min(n, max(k, math.ceil(self.knobs.over_retrieval * k)))
        return k, pool, min(self.knobs.num_seeds, pool)

    def _ranked(self, node: Tensor) -> Tensor | None:
        """Which local nodes are passages (``None`` when every node is: a passage graph)."""
        return None if self.graph.num_passages == self.graph.num_nodes else node < self.graph.num_passages

    def entity_seeds(self, questions: Sequence[str]) -> tuple[Tensor, Tensor] | None:
        """The query-matched entity seeds of ``questions`` as (question, graph row), or ``None``
        when they are off (no matcher, ``entity_seeds = 0`` or no entity node)."""
        if self.entity_matcher is None:
            return None
        rows = [[r for r in found if not self.left_out[r]] for found in self.entity_matcher(questions)]
        question = torch.tensor([q for q, found in enumerate(rows) for _ in found], dtype=torch.long)
        node = torch.tensor([row for found in rows for row in found], dtype=torch.long)
        return question.to(self.graph.device), node.to(self.graph.device)

    def entity_weight(self, node: Tensor) -> Tensor:
        """An entity seed's relative teleport weight: the inverse of its degree in the graph (the
        passages that mention it, plus its relation edges where an extractor gave triples); 1 for
        a passage seeded for an entity only it mentions (an entity of degree 1)."""
        degree = (self.graph.rowptr[node + 1] - self.graph.rowptr[node]).clamp_min(1).float()
        return torch.where(node < self.graph.num_passages, 1.0, 1.0 / degree)

    def vouched(self, questions: Sequence[str], seeds: tuple[Tensor, Tensor] | None, candidates: DenseCandidates) -> Tensor | None:
        """``[S]`` bool over the entity ``seeds`` (question, row) of ``questions``: which are vouched for: entity nodes,
        unique-mention passages that need no voucher (outside the ``vouch_share`` strongest bridges, unless the knob
        ``unique_mentions_vouched``), and the others in their question's dense pool or titled with the name the question
        writes (:meth:`~isorag_pyg.graph.query_entities.QueryEntityMatcher.titled_rows`); ``None`` (all are) without
        seeds or where none needs one."""
        if seeds is None or not bool(self.needs_voucher[seeds[1]].any()):
            return None
        question, node = seeds
        in_pool = (candidates.pool[question] == node.unsqueeze(1)).any(dim=1)
        titled_rows = getattr(self.entity_matcher, "titled_rows", None)  # a matcher of one's own may not know titles
        titled = titled_rows(questions) if titled_rows else [set() for _ in questions]
        by_title = torch.tensor([row in titled[q] for q, row in zip(question.tolist(), node.tolist())], dtype=torch.bool, device=node.device)
        return (node >= self.graph.num_passages) | ~self.needs_voucher[node] | in_pool | by_title

    def local_graphs(self, candidates: DenseCandidates, num_seeds: int, entity_seeds: tuple[Tensor, Tensor] | None = None) -> LocalGraphBatch:
        """The local candidate graphs around ``candidates`` (the pool and the seeds' neighbourhood)
        and around the query-matched ``entity_seeds`` (:meth:`entity_seeds`)."""
        return build_local_graphs(candidates, self.graph, num_seeds, self.knobs.hops, self.knobs.max_expansion, entity_seeds)

    @torch.inference_mode()
    def retrieve(self, queries: Queries, k: int, trace: bool = False) -> RetrievalResult:
        chunk = candidate_chunk(self.graph, self.ann, self.knobs.query_chunk)
        if self.lexical is None:
            return retrieve_in_chunks(queries, chunk, lambda part: self._retrieve_chunk(part, k, trace))
        k, depth, _ = self.sizes(k)  # the walk ranks its pool's worth (L), the lexical retriever as many, the fusion keeps k
        walked = retrieve_in_chunks(queries, chunk, lambda part: self._retrieve_chunk(part, k, trace, depth))
        return hybrid_ranking(walked, self.lexical.retrieve(queries, depth), self.knobs.lexical_weight, self.quarantined, self.top, k)

    def _retrieve_chunk(self, queries: Queries, k: int, trace: bool, depth: int | None = None) -> RetrievalResult:
        """The top ``k`` (``depth``: that many instead, from the same local graphs) of ``queries``."""
        k, pool, m = self.sizes(k)
        candidates = dense_candidates(self.graph, queries.embeddings, pool, self.ann)
        seeds = self.entity_seeds(queries.texts)
        local = self.local_graphs(candidates, m, seeds)
        vouched = self.vouched(queries.texts, seeds, candidates)
        keep = self.edge_keep[local.edge_slot]
        named = self.named_bridge[local.node]
        has_named = bool(named.any())
        weight = follow = None
        if has_named or self.knobs.edge_weights or self.follows_backlinks:
            # local edges come as (upward edges, their reverses), both halves over the same slots
            edge = self.graph.edge_ids(local.edge_slot[: local.edge_slot.numel() // 2])
            if has_named:
                unwalked = named & ~self.named_bridges_walked(named, local.edge_index, edge, local.seed_pos)
                keep &= ~(unwalked[local.edge_index[0]] | unwalked[local.edge_index[1]])
            if self.knobs.edge_weights or self.follows_backlinks:
                weight, follow = self.walk_edges(edge[keep])
        dense = candidates.score(local.batch, local.node)
        scored = score_local_graphs(local.edge_index[:, keep], local.seed_pos, candidates.pool_scores[:, :m], dense, local.batch, local.ptr,
                                    self.knobs, weight, self._ranked(local.node), local.entity_pos, self.entity_weight(local.node[local.entity_pos]),
                                    follow, vouched)
        positions, top_scores = self.top(scored.score, local.batch, local.ptr, local.node, depth or k)
        num_queries, num_local = len(queries), local.node.numel()
        stats = {
            "queries": float(num_queries),
            "candidates": float(num_local),
            "local_edges": float(local.edge_index.size(1)),
            "removed_edges": float(keep.numel() - int(keep.sum())),
            "ppr_iterations_max": float(scored.iterations),
        }
        traces = local.traces(keep, scored.pi, positions, top_scores) if trace else None
        return RetrievalResult(local.node[positions].cpu(), top_scores.cpu(), stats, traces)

    def walk_left_out(self, node: Tensor, edge_index: Tensor, edge: Tensor, seed_pos: Tensor) -> Tensor:
        """Which nodes of local graphs (corpus rows ``node``, edges ``edge_index`` between local
        positions, their columns ``edge`` in the corpus graph's ``edge_index``) the walk leaves out:
        the :attr:`left_out` passages, less the bridges whose title one of their question's seeds
        (local positions ``seed_pos``) names, where few passages name it
        (:func:`specifically_named`). A passage's author writes its own mentions, not the mentions
        of it: an injected bridge comes back only for a question one of whose seeds names it, a
        passage its attacker did not write or one he made read like that question."""
        left_out = self.left_out[node]
        named = self.named_bridge[node]
        if not named.any():
            return left_out
        return left_out & ~self.named_bridges_walked(named, edge_index, edge, seed_pos)

    def named_bridges_walked(self, named: Tensor, edge_index: Tensor, edge: Tensor, seed_pos: Tensor) -> Tensor:
        """Which local nodes are bridges walked for their question: of the :attr:`named_bridge`
        ones (``named``, local), those a seed (local positions ``seed_pos``) names by a title
        mention edge (``edge_index`` between local positions, columns ``edge`` of the corpus
        graph's ``edge_index``)."""
        seed = torch.zeros_like(named)
        seed[seed_pos.reshape(-1)] = True
        src, dst = edge_index
        walked = torch.zeros_like(named)
        walked[dst[seed[src] & named[dst] & self.graph.edge_mention[edge]]] = True
        return walked

    def top(self, score: Tensor, batch: Tensor, ptr: Tensor, node: Tensor, k: int) -> tuple[Tensor, Tensor]:
        """The ranking: per query (segment ``ptr`` of ``batch``) the top ``k`` positions into
        ``score`` and their scores; with ``near_duplicate_cosine``, the passages that
        near-duplicate a better-ranked one (by the embeddings of their corpus rows ``node``) go
        after the rest of the best ``NEAR_DUPLICATE_WINDOW * k``, keeping their scores (so these
        are not sorted then)."""
        threshold = self.knobs.near_duplicate_cosine
        if threshold > 1.0:  # no two unit vectors are that close: off
            return segment_topk(score, batch, ptr, k)
        positions, scores = segment_topk(score, batch, ptr, NEAR_DUPLICATE_WINDOW * k)
        valid = torch.isfinite(scores)  # passages only (entity nodes score -inf), padding excluded
        rows = node[positions.clamp_min(0)].to(self.graph.device)
        width, dim = rows.size(1), self.graph.dim
        block = max(1, NEAR_DUPLICATE_BLOCK_BYTES // (4 * width * (dim + width)))  # queries whose vectors and cosines fit the budget
        order = torch.cat([near_duplicates_last(self.graph.embeddings[rows[q:q + block]], valid[q:q + block].to(rows.device), threshold)
                           for q in range(0, rows.size(0), block)]).to(positions.device)[:, :k]
        return positions.gather(1, order), scores.gather(1, order)

    def walk_edges(self, edge: Tensor) -> tuple[Tensor | None, Tensor | None]:
        """How the walk follows corpus edges (columns of the graph's ``edge_index``): their
        weights (the graph's, with ``edge_weights``; else ``None``) and the share of each edge's
        transition it takes (``backlink_weight`` for a one-way mention walked backwards, 1 for
        the rest; ``None`` when that is every edge's)."""
        weight = self.graph.require_edge_weight()[edge] if self.knobs.edge_weights else None
        if not self.follows_backlinks:
            return weight, None
        return weight, torch.where(self.graph.edge_backlink[edge], self.knobs.backlink_weight, 1.0)

    @property
    def follows_backlinks(self) -> bool:
        """Whether the walk follows some edges, the graph's backlinks, with less than their whole share."""
        return self.graph.edge_backlink is not None and self.knobs.backlink_weight != 1.0
