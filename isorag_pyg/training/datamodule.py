"""Graph-supervised triplets for training f_θ."""
from __future__ import annotations

import lightning as L
import torch
from torch import Tensor
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, TensorDataset
from torch_geometric.data import Data
from torch_geometric.utils import degree, to_undirected

from isorag_pyg.nn.losses import degree_target_radius
from isorag_pyg.utils.isoperimetric import clean_edge_index


class EdgeKeySet:
    """Membership test for directed edges ``(u, v)`` by binary search in sorted ``u * N + v`` keys
    (a batch costs O(B log E), whatever the graph size)."""

    def __init__(self, edge_index: Tensor, num_nodes: int):
        self.n = num_nodes
        self.keys = torch.unique(edge_index[0] * num_nodes + edge_index[1])  # sorted

    def contains(self, u: Tensor, v: Tensor) -> Tensor:
        if self.keys.numel() == 0:
            return torch.zeros(u.shape, dtype=torch.bool)
        query = u * self.n + v
        slot = torch.searchsorted(self.keys, query).clamp_max(self.keys.numel() - 1)
        return self.keys[slot] == query


def sample_negatives(anchor: Tensor, edges: EdgeKeySet, num: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """``num`` random non-neighbours per anchor (one resampling round) and a validity mask."""
    shape = (anchor.numel(), num)
    neg = torch.randint(0, edges.n, shape, generator=generator)
    a = anchor.unsqueeze(1).expand(shape)
    bad = edges.contains(a, neg) | (neg == a)
    neg[bad] = torch.randint(0, edges.n, (int(bad.sum()),), generator=generator)
    valid = ~(edges.contains(a, neg) | (neg == a))
    return neg, valid


class TripletBatcher:
    """Turn a batch of (anchor, positive) edges into feature tensors with sampled negatives."""

    def __init__(self, x: Tensor, target_radius: Tensor, edges: EdgeKeySet, num_negatives: int, radial_nodes: int, seed: int):
        self.x, self.target_radius, self.edges = x, target_radius, edges
        self.num_negatives, self.radial_nodes = num_negatives, radial_nodes
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, edges: tuple[Tensor, Tensor]) -> dict[str, Tensor]:
        anchor, positive = edges
        negative, valid = sample_negatives(anchor, self.edges, self.num_negatives, self.generator)
        radial = torch.randint(0, self.x.size(0), (self.radial_nodes,), generator=self.generator)
        return {
            "anchor": self.x[anchor],
            "positive": self.x[positive],
            "negative": self.x[negative],
            "negative_valid": valid,
            "radial_x": self.x[radial],
            "radial_target": self.target_radius[radial],
        }


class GraphTripletDataModule(L.LightningDataModule):
    """Splits the corpus graph's edges into training edges and held-out validation triplets.

    Args:
        data: the corpus graph (``x``, undirected ``edge_index``).
        val_fraction: share of undirected edges held out for validation, at least one
            (default: ``0.1``).
        batch_size: anchor/positive pairs per step (default: ``1024``).
        num_negatives: negatives sampled per anchor; more than one enables hard-negative
            mining in the module (default: ``1``).
        radial_nodes: random nodes per step for the radial regulariser (default: ``256``).
        r_min, r_max: radius targets for the highest / lowest degree (default: ``0.1``, ``0.9``).
        seed: split and sampling seed (default: ``0``).
    """

    def __init__(
        self,
        data: Data,
        val_fraction: float = 0.1,
        batch_size: int = 1024,
        num_negatives: int = 1,
        radial_nodes: int = 256,
        r_min: float = 0.1,
        r_max: float = 0.9,
        seed: int = 0,
    ):
        super().__init__()
        if not 0.0 < val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
        self.data, self.val_fraction, self.batch_size = data, val_fraction, batch_size
        self.num_negatives, self.radial_nodes, self.seed = num_negatives, radial_nodes, seed
        self.r_min, self.r_max = r_min, r_max
        self._prepared = False

    def setup(self, stage: str | None = None) -> None:
        if self._prepared:
            return
        n = self.data.num_nodes
        x = self.data.x.float()
        if not torch.isfinite(x).all():
            raise ValueError("node features contain NaN or inf")
        ei = clean_edge_index(to_undirected(self.data.edge_index, num_nodes=n), n)
        if ei.size(1) == 0:
            raise ValueError("the corpus graph has no edges: f_θ needs graph supervision")
        pairs = ei[:, ei[0] < ei[1]]
        generator = torch.Generator().manual_seed(self.seed)
        perm = torch.randperm(pairs.size(1), generator=generator)
        num_val = max(1, round(self.val_fraction * pairs.size(1)))
        if pairs.size(1) <= num_val:
            raise ValueError(f"the graph has {pairs.size(1)} edge(s): too few to hold out validation edges")
        val_pairs, train_pairs = pairs[:, perm[:num_val]], pairs[:, perm[num_val:]]
        train_ei = to_undirected(train_pairs, num_nodes=n)
        all_edges = EdgeKeySet(ei, n)
        self.node_degree = degree(ei[0], n)
        self.target_radius = degree_target_radius(self.node_degree, self.r_min, self.r_max)
        self.x = x
        self.train_set = TensorDataset(train_ei[0], train_ei[1])
        neg, valid = sample_negatives(val_pairs[0], all_edges, 1, generator)
        keep = valid[:, 0]
        self.val_triplets = torch.stack([val_pairs[0][keep], val_pairs[1][keep], neg[keep, 0]])
        self.batcher = TripletBatcher(x, self.target_radius, all_edges, self.num_negatives, self.radial_nodes, self.seed)
        self._prepared = True

    def train_dataloader(self) -> DataLoader:
        # whole batches of edge rows at once (one tensor index, no per-edge Python calls)
        generator = torch.Generator().manual_seed(self.seed)
        order = RandomSampler(self.train_set, generator=generator)
        return DataLoader(self.train_set, batch_size=None, sampler=BatchSampler(order, self.batch_size, drop_last=False),
                          collate_fn=self.batcher, generator=generator)

    def val_dataloader(self) -> DataLoader:
        """All nodes (index, features): the module embeds them and scores held-out triplets."""
        dataset = TensorDataset(torch.arange(self.x.size(0)), self.x)
        return DataLoader(dataset, batch_size=65536)

    def cosine_baseline_accuracy(self) -> float:
        """Held-out triplet accuracy of plain cosine similarity on the input embeddings."""
        a, p, n = self.val_triplets
        unit = torch.nn.functional.normalize(self.x, dim=-1)
        return float(((unit[a] * unit[p]).sum(-1) > (unit[a] * unit[n]).sum(-1)).float().mean())
