"""The ISO-RAG edge filter as a PyG transform."""
from __future__ import annotations

import copy
import logging
from collections.abc import Callable

import torch
from torch import Tensor
from torch_geometric.data import Batch, Data
from torch_geometric.data.datapipes import functional_transform
from torch_geometric.transforms import BaseTransform

from isorag_pyg.knobs import PHI_MODES, ISOKnobs, PhiSpec, check_beta
from isorag_pyg.utils.isoperimetric import ablate_log_phi, isoperimetric_keep_mask, log_phi_from_ball

log = logging.getLogger(__name__)

PhiSource = str | Callable[[Data], Tensor]


@functional_transform("isoperimetric_filter")
class IsoperimetricFilter(BaseTransform):
    r"""Removes edges between nodes whose hyperbolic isoperimetric profiles disagree
    (functional name: :obj:`isoperimetric_filter`).

    An edge :math:`(u, v)` is kept iff
    :math:`\min(\varphi_u, \varphi_v) / \max(\varphi_u, \varphi_v) \ge \beta`
    (see :func:`~isorag_pyg.utils.log_isoperimetric_profile`). Edges are removed with
    :meth:`~torch_geometric.data.Data.edge_subgraph`, so every edge attribute stays aligned:
    the attributes cut with the edges are those named as edge attributes (``edge_attr``,
    ``edge_weight``, ``edge_type``, ...: the name contains ``"edge"``) with one entry per edge;
    every other attribute is kept whole, even a list or tensor that happens to be as long as
    the edge list (a graph's passage ids, a query's seeds), which PyG's own rule would cut. On a
    :class:`~torch_geometric.data.Batch` the per-graph slices are updated too. The
    transform stores ``phi`` and ``log_phi`` (node level) and ``num_removed_edges`` on the data.

    Args:
        beta (float, optional): the ratio threshold in :math:`(0, 1]`; ``1`` keeps only edges
            between equal profiles, values near ``0`` keep almost all. (default: :obj:`0.2`,
            ISO-RAG's, :class:`~isorag_pyg.knobs.ISOKnobs`)
        p (float, optional): the volume exponent, :math:`v(u) = \lambda(z_u)^p`; ``0`` counts
            nodes and needs no coordinates. (default: :obj:`0.0`)
        eps (float, optional): :math:`\epsilon` added to :math:`V(S_u)`. (default: :obj:`1e-8`)
        shell_floor (float, optional): added to :math:`V(\partial S_u)` in units of the volume
            of a node at the origin (:math:`2^p`), so nodes with an empty 2-hop shell get a
            finite profile; ``0`` is the plain definition (empty shell: :math:`\varphi = 0`).
            Used with ``phi_source="z"``. (default: :obj:`8.0`)
        phi_source (str or callable, optional): where :math:`\varphi` comes from: ``"z"`` computes it
            from the ball coordinates in ``data[z_attr]``; ``"phi"`` reads a precomputed
            ``data.log_phi`` (or ``data.phi``); a callable maps the data to :math:`\varphi`
            (non-negative, one value a node). (default: :obj:`"z"`)
        phi_mode (str, optional): ``"real"`` uses :math:`\varphi` as is; the ablations
            ``"uniform"`` (all equal: nothing is removed), ``"shuffled"`` (real values permuted
            over nodes) and ``"random"`` (uniform random in :math:`(0, 1)`). (default: :obj:`"real"`)
        curvature (float, optional): the ball's curvature magnitude :math:`c`. (default: :obj:`1.0`)
            ``p``, ``eps``, ``shell_floor`` and ``curvature`` form a
            :class:`~isorag_pyg.utils.PhiSpec`, whose defaults they share.
        z_attr (str, optional): the node attribute holding ball coordinates. (default: :obj:`"z"`)
        seed (int, optional): seed for ``"shuffled"`` and ``"random"``. (default: :obj:`0`)
        leave_out (str, optional): a boolean node attribute: every edge of a node where it is
            ``True`` is removed too (ISO-RAG leaves its strongest bridges and quarantined
            passages out of the walk this way). (default: :obj:`None`)

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> ei = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])  # path 0-1-2-3
        >>> data = Data(edge_index=ei, log_phi=torch.tensor([0.0, 0.0, 0.0, -3.0]), num_nodes=4)
        >>> out = IsoperimetricFilter(beta=0.5, phi_source="phi")(data)
        >>> out.edge_index
        tensor([[0, 1, 1, 2],
                [1, 0, 2, 1]])
        >>> out.num_removed_edges
        2
    """

    def __init__(
        self,
        beta: float = ISOKnobs.beta,
        p: float = PhiSpec.p,
        eps: float = PhiSpec.eps,
        shell_floor: float = PhiSpec.shell_floor,
        phi_source: PhiSource = "z",
        phi_mode: str = "real",
        curvature: float = PhiSpec.curvature,
        z_attr: str = "z",
        seed: int = 0,
        leave_out: str | None = None,
    ) -> None:
        check_beta(beta)
        if phi_mode not in PHI_MODES:
            raise ValueError(f"phi_mode must be one of {PHI_MODES}, got {phi_mode!r}")
        if isinstance(phi_source, str) and phi_source not in ("z", "phi"):
            raise ValueError(f"phi_source must be 'z', 'phi' or a callable, got {phi_source!r}")
        self.spec = PhiSpec(p=p, eps=eps, shell_floor=shell_floor, curvature=curvature)
        self.beta, self.phi_source, self.phi_mode, self.z_attr, self.seed = beta, phi_source, phi_mode, z_attr, seed
        self.leave_out = leave_out

    def real_log_phi(self, data: Data) -> Tensor:
        """:math:`\\log\\varphi` before any ablation is applied."""
        if callable(self.phi_source):
            values = torch.as_tensor(self.phi_source(data), dtype=torch.float64)
            if (values < 0).any() or values.isnan().any():
                raise ValueError("the phi callable must return non-negative values")
            return values.log()
        if self.phi_source == "phi":
            if "log_phi" in data:
                return data.log_phi.double()
            if "phi" in data:
                return data.phi.double().log()
            raise ValueError("phi_source='phi' needs a 'log_phi' or 'phi' node attribute on the data")
        if self.z_attr not in data and self.spec.needs_coordinates:
            raise ValueError(f"phi_source='z' with p = {self.spec.p} needs ball coordinates in data.{self.z_attr}")
        z = data.get(self.z_attr)
        return log_phi_from_ball(data.edge_index, z, self.spec, num_nodes=data.num_nodes)

    @torch.no_grad()
    def forward(self, data: Data) -> Data:
        n = data.num_nodes
        device = data.edge_index.device
        # uniform and random ablations ignore the real values (and need no coordinates)
        real = self.real_log_phi(data) if self.phi_mode in ("real", "shuffled") else torch.zeros(n, dtype=torch.float64)
        log_phi = ablate_log_phi(real.to(device), self.phi_mode, self.seed)
        if log_phi.numel() != n:
            raise ValueError(f"phi has {log_phi.numel()} values for {n} nodes")
        keep = isoperimetric_keep_mask(data.edge_index, log_phi, self.beta)
        if self.leave_out is not None:
            if self.leave_out not in data:
                raise ValueError(f"leave_out={self.leave_out!r} needs a boolean node attribute of that name on the data")
            left_out = data[self.leave_out].to(device).bool()
            keep &= ~(left_out[data.edge_index[0]] | left_out[data.edge_index[1]])
        removed = int((~keep).sum())
        data = _edge_subgraph(data, keep)
        data.log_phi = log_phi
        data.phi = log_phi.exp()
        if isinstance(data, Batch):
            for key in ("log_phi", "phi"):
                data._slice_dict[key] = data.ptr.cpu()
                data._inc_dict[key] = torch.zeros(data.num_graphs, dtype=torch.long)
        data.num_removed_edges = removed
        log.debug("%s removed %d of %d edges", self, removed, keep.numel())
        return data

    def __repr__(self) -> str:
        source = self.phi_source if isinstance(self.phi_source, str) else getattr(self.phi_source, "__name__", "callable")
        return f"{self.__class__.__name__}(beta={self.beta}, p={self.spec.p}, phi_source={source!r}, phi_mode={self.phi_mode!r})"


def _edge_subgraph(data: Data, keep: Tensor) -> Data:
    """``data.edge_subgraph(keep)`` cutting only the edge-named attributes (the class docstring);
    on a Batch with its per-graph edge slices recomputed."""
    whole = {key: value for key, value in data.items() if "edge" not in key and data.is_edge_attr(key)}
    view = copy.copy(data)
    for key in whole:
        del view[key]
    out = view.edge_subgraph(keep)
    for key, value in whole.items():
        out[key] = value
    if isinstance(data, Batch):
        out._slice_dict, out._inc_dict = dict(data._slice_dict), dict(data._inc_dict)  # the input batch keeps its own
        graph_of_edge = data.batch[data.edge_index[0]]
        kept_per_graph = torch.bincount(graph_of_edge[keep], minlength=data.num_graphs).cpu()
        slices = torch.cat([kept_per_graph.new_zeros(1), kept_per_graph.cumsum(0)])
        for key, value in data.items():
            if key not in whole and isinstance(value, Tensor) and data.is_edge_attr(key):
                out._slice_dict[key] = slices
    return out
