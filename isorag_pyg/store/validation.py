"""Checks on what an index directory holds that do not trust its writer.

The checksums in the manifest prove that files were not changed after the manifest was written;
they say nothing about a buggy or malicious writer, who can recompute them. So the manifest is
checked against a schema (types, required keys, file names confined to the index folder) and the
tensors for shape, dtype, finiteness and ranges before anything uses them: a bad index is an
:class:`~isorag_pyg.store.layout.IndexFormatError` naming the file, never a ``TypeError`` later
or a silently different ranking.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from torch import Tensor

from isorag_pyg.store.layout import IndexFormatError

_SHA256 = r"^[0-9a-f]{64}$"


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")


class FileEntry(_Strict):
    bytes: int = Field(ge=0)
    sha256: str = Field(pattern=_SHA256)


class EncoderEntry(_Strict):
    name: str
    fingerprint: str
    dim: int = Field(ge=1)


class GraphEntry(_Strict):
    builders: dict[str, dict[str, Any]]
    statistics: dict[str, Any]


class Architecture(_Strict):
    in_dim: int = Field(ge=1)
    out_dim: int = Field(ge=1)
    hidden_dim: int | None = Field(default=None, ge=1)


class FThetaEntry(_Strict):
    architecture: Architecture


class AnnEntry(_Strict):
    kind: str
    params: dict[str, int | float]


class Counts(_Strict):
    passages: int = Field(ge=1)
    entities: int = Field(default=0, ge=0)
    edges: int = Field(ge=0)
    dim: int = Field(ge=1)


class Manifest(_Strict):
    """The keys :meth:`ISORAGIndex.load` reads, with their types (other keys are kept as they are)."""

    format_version: int
    encoder: EncoderEntry
    graph: GraphEntry
    f_theta: FThetaEntry | None = None
    phi: dict[str, float | int]
    knobs: dict[str, dict[str, Any]] = {}
    ann: AnnEntry = AnnEntry(kind="exact", params={})
    counts: Counts
    corpus_hash: str
    files: dict[str, FileEntry]
    generation: int = Field(default=0, ge=0)
    next_id: int | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=1)
    created: str | None = None


def validate_manifest(path: Path, manifest: dict[str, Any]) -> Manifest:
    """The manifest checked against :class:`Manifest`; its file names must be plain names inside
    the index folder. Raises :class:`IndexFormatError` naming ``path`` and the bad field."""
    try:
        checked = Manifest.model_validate(manifest)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise IndexFormatError(path, f"invalid manifest: {where}: {first['msg']}") from None
    for name in checked.files:
        if name in ("", ".", "..") or Path(name).name != name or "\\" in name or "\x00" in name:
            raise IndexFormatError(path, f"invalid manifest: file {name!r} is not a plain file name inside the index folder")
    return checked


def require_listed(path: Path, manifest: dict[str, Any], names: list[str]) -> None:
    """Every file the loader reads must be listed (so its size and checksum are checked)."""
    for name in names:
        if name not in manifest["files"]:
            raise IndexFormatError(path, f"invalid manifest: {name} is read but not listed under 'files'")


def check_tensor(path: Path, tensors: dict[str, Tensor], key: str, shape: tuple[int | None, ...], dtype: torch.dtype,
                 finite: bool = False, required: bool = True) -> Tensor | None:
    """``tensors[key]`` if it has ``dtype`` and ``shape`` (``None``: any size on that axis) and, with
    ``finite``, no NaN or infinity; else :class:`IndexFormatError`."""
    tensor = tensors.get(key)
    if tensor is None:
        if required:
            raise IndexFormatError(path, f"'{key}' missing")
        return None
    if tensor.dtype != dtype:
        raise IndexFormatError(path, f"'{key}' is {tensor.dtype}, expected {dtype}")
    if tensor.dim() != len(shape) or any(want is not None and got != want for got, want in zip(tensor.shape, shape)):
        raise IndexFormatError(path, f"'{key}' has shape {tuple(tensor.shape)}, expected {shape}".replace("None", "any"))
    if finite and not bool(torch.isfinite(tensor).all()):
        raise IndexFormatError(path, f"'{key}' holds NaN or infinite values")
    return tensor


def check_range(path: Path, key: str, tensor: Tensor, low: int, high: int) -> None:
    """Integer values of ``tensor`` in ``[low, high)``."""
    if tensor.numel() and (int(tensor.min()) < low or int(tensor.max()) >= high):
        raise IndexFormatError(path, f"'{key}' has values outside [{low}, {high})")


def check_index_tensors(path: Path, tensors: dict[str, Tensor], n: int, dim: int, edges: int, builders: int,
                        passages_bytes: int, z_dim: int | None, curvature: float, entities: int = 0) -> None:
    """The shapes, dtypes, finiteness, ranges and monotonicity of an index's tensors (graph nodes:
    the ``n`` passages, then ``entities`` entity nodes)."""
    nodes = n + entities
    check_tensor(path, tensors, "embeddings", (n, dim), torch.float32, finite=True)
    offsets = check_tensor(path, tensors, "passage_offsets", (n + 1,), torch.int64)
    assert offsets is not None
    if int(offsets[0]) != 0 or int(offsets[-1]) != passages_bytes or not bool((offsets[1:] > offsets[:-1]).all()):
        raise IndexFormatError(path, f"'passage_offsets' must rise strictly from 0 to the passages file's {passages_bytes} bytes")
    edge_index = check_tensor(path, tensors, "edge_index", (2, edges), torch.int64)
    check_range(path, "edge_index", edge_index, 0, nodes)
    check_tensor(path, tensors, "edge_weight", (edges,), torch.float32, finite=True)
    check_range(path, "edge_source", check_tensor(path, tensors, "edge_source", (edges,), torch.int64), 1, 1 << builders)
    check_tensor(path, tensors, "edge_backlink", (edges,), torch.bool, required=False)
    log_phi = check_tensor(path, tensors, "log_phi", (nodes,), torch.float64)
    if bool(torch.isnan(log_phi).any()) or bool((log_phi == float("inf")).any()):
        raise IndexFormatError(path, "'log_phi' holds NaN or +infinity")
    bridging = check_tensor(path, tensors, "bridging", (nodes,), torch.float64, required=False)
    if bridging is not None and (bool(torch.isnan(bridging).any()) or bool((bridging == float("inf")).any())):
        raise IndexFormatError(path, "'bridging' holds NaN or +infinity")
    knn = check_tensor(path, tensors, "knn_edges", (2, None), torch.int64, required=False)
    if knn is not None:
        check_range(path, "knn_edges", knn, 0, n)
    if z_dim is not None:
        z = check_tensor(path, tensors, "z", (nodes, z_dim), torch.float32, finite=True)
        if z.numel() and float(z.norm(dim=-1).max()) >= curvature ** -0.5:
            raise IndexFormatError(path, f"'z' has points outside the Poincaré ball of radius {curvature ** -0.5:g}")


def check_finite_weights(path: Path, state: dict[str, Tensor]) -> None:
    """f_θ's weights: floating point and finite."""
    for key, tensor in state.items():
        if not tensor.is_floating_point() or not bool(torch.isfinite(tensor).all()):
            raise IndexFormatError(path, f"'{key}' is not a finite floating-point tensor")
