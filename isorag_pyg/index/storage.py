"""An index directory on disk, saved and loaded side by side: a JSON manifest with a checksum of
every file, written atomically, beside ``passages.jsonl``, ``tensors.safetensors`` and, with f_θ,
``f_theta.safetensors``, with an ANN index ``ann.safetensors``, with an entity graph
``entities.json`` (its entity nodes' names, rows after the passages).

Nothing here unpickles: tensors are safetensors, passages JSON lines, the manifest JSON, so
opening an index from an untrusted source never executes code. The checksums detect corrupt,
truncated or edited files; they do not authenticate who wrote them.
"""
from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safetensors.torch import load_file, save_file
from torch import Tensor
from torch_geometric.data import Data

from isorag_pyg.graph.entity_graph import attach_entity_nodes
from isorag_pyg.index.contents import IndexContents
from isorag_pyg.index.passages import PassageStore, write_passages
from isorag_pyg.knobs import PhiSpec
from isorag_pyg.nn.poincare_encoder import PoincareEncoder
from isorag_pyg.retrieval.ann import ANNIndex
from isorag_pyg.utils.files import file_sha256
from isorag_pyg.version import __version__

#: The on-disk layout this version writes and the newest it reads.
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
TENSORS, PASSAGES, F_THETA, ANN = "tensors.safetensors", "passages.jsonl", "f_theta.safetensors", "ann.safetensors"
ENTITIES = "entities.json"


class IndexFormatError(ValueError):
    """An index directory is missing, corrupt, tampered with or of a newer format; the message
    names the file."""

    def __init__(self, path: str | Path, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = str(path)


def _manifest_digest(manifest: dict[str, Any]) -> str:
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two directories (Linux ``renameat2(RENAME_EXCHANGE)``); ``False`` where
    the system has no such call."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: the file system or kernel cannot
        return False
    raise OSError(err, os.strerror(err), str(b))


def is_index_dir(path: Path) -> bool:
    return (path / MANIFEST).is_file()


def write_index_dir(target: str | Path, write_files: Callable[[Path], dict[str, Any]]) -> Path:
    """Write an index to ``target`` atomically.

    ``write_files(tmp_dir)`` writes the data files into a fresh sibling directory and returns the
    manifest (without ``files``); the checksum of every file and of the manifest are added, all
    is fsynced, and only then does the new directory take ``target``'s place (an atomic swap
    where the system allows it). A crash before that leaves the previous index as it was.
    ``target`` may be missing, an empty directory or an earlier index; anything else is refused.
    """
    target = Path(target)
    if target.exists() and not (target.is_dir() and (is_index_dir(target) or not any(target.iterdir()))):
        raise FileExistsError(f"{target}: exists and is not an isorag index (refusing to replace it)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        manifest = write_files(tmp)
        files = {}
        for path in sorted(p for p in tmp.iterdir() if p.name != MANIFEST):
            _fsync(path)
            files[path.name] = {"bytes": path.stat().st_size, "sha256": file_sha256(path)}
        manifest = {**manifest, "files": files}
        manifest["manifest_sha256"] = _manifest_digest(manifest)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))
        _fsync(tmp / MANIFEST)
        _fsync(tmp)
        if not target.exists():
            os.rename(tmp, target)
        elif _exchange(tmp, target):
            shutil.rmtree(tmp)  # tmp now holds the previous index
        else:
            old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
            os.rename(target, old)
            os.rename(tmp, target)
            shutil.rmtree(old)
        _fsync(target.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def read_manifest(directory: str | Path, verify: bool = True) -> dict[str, Any]:
    """The manifest of an index directory, after checking its format version, its own checksum
    and, unless ``verify`` is ``False``, the size and SHA-256 of every file it lists (sizes are
    always checked)."""
    directory = Path(directory)
    path = directory / MANIFEST
    if not directory.is_dir():
        raise IndexFormatError(directory, "no such index directory")
    if not path.is_file():
        raise IndexFormatError(path, "missing: not an isorag index directory")
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise IndexFormatError(path, f"not valid JSON ({err})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("format_version"), int):
        raise IndexFormatError(path, "no format_version: not an isorag index manifest")
    if manifest["format_version"] > FORMAT_VERSION:
        raise IndexFormatError(path, f"index format {manifest['format_version']} is newer than this isorag_pyg reads "
                                     f"({FORMAT_VERSION}); upgrade isorag_pyg")
    if manifest.get("manifest_sha256") != _manifest_digest(manifest):
        raise IndexFormatError(path, "checksum mismatch: the manifest was edited or corrupted")
    for name, expected in manifest.get("files", {}).items():
        file = directory / name
        if not file.is_file():
            raise IndexFormatError(file, "missing")
        if file.stat().st_size != expected["bytes"]:
            raise IndexFormatError(file, f"size {file.stat().st_size} bytes, the manifest says {expected['bytes']} (truncated or replaced)")
        if verify and file_sha256(file) != expected["sha256"]:
            raise IndexFormatError(file, "checksum mismatch (corrupted or tampered with)")
    return manifest


@dataclass(frozen=True)
class StoredANN:
    """An ANN index still in its file: an opened index reads it on first use."""

    path: Path
    kind: str
    params: dict[str, Any]

    def open(self, num_passages: int, dim: int) -> ANNIndex:
        """The index, checked against the passages it must cover."""
        try:
            ann = ANNIndex.load(self.path)
        except Exception as err:  # noqa: BLE001 - safetensors' or FAISS's own errors
            raise IndexFormatError(self.path, f"unreadable ANN index ({err})") from None
        if (ann.kind, ann.num_passages, ann.dim) != (self.kind, num_passages, dim):
            raise IndexFormatError(self.path, f"a {ann.kind} index of {ann.num_passages} vectors of size {ann.dim}, "
                                              f"not the manifest's {self.kind} over {num_passages} passages")
        return ann


def ann_info(ann: ANNIndex | StoredANN | None) -> dict[str, Any]:
    """The manifest's ``ann`` entry: ``{"kind", "params"}`` (``exact``: no ANN index)."""
    return {"kind": "exact", "params": {}} if ann is None else {"kind": ann.kind, "params": ann.params}


def index_manifest(contents: IndexContents, encoder: dict[str, Any], phi: PhiSpec, graph_spec: dict[str, Any],
                   f_theta_info: dict[str, Any] | None, knobs: dict[str, dict[str, Any]], created: str,
                   ann: ANNIndex | StoredANN | None, **_: Any) -> dict[str, Any]:
    """What :func:`save_index` records about an index (without the file checksums); takes the
    index's constructor arguments."""
    return {
        "format_version": FORMAT_VERSION,
        "package": "isorag_pyg",
        "package_version": __version__,
        "created": created,
        "encoder": encoder,
        "graph": {"builders": graph_spec, "statistics": contents.statistics},
        "f_theta": f_theta_info,
        "phi": dataclasses.asdict(phi),
        "knobs": knobs,
        "ann": ann_info(ann),
        "counts": {"passages": len(contents.passages), "entities": len(getattr(contents.graph, "entity_names", [])),
                   "edges": int(contents.graph.edge_index.size(1)), "dim": int(contents.embeddings.size(1))},
        "corpus_hash": contents.corpus_hash,
    }


def save_index(directory: str | Path, **fields: Any) -> Path:
    """Write an index, given as its constructor arguments, to ``directory`` atomically (see
    :func:`write_index_dir`)."""
    contents: IndexContents = fields["contents"]
    ann, f_theta = fields["ann"], fields["f_theta"]
    if isinstance(ann, StoredANN):
        ann = ann.open(len(contents.passages), int(contents.embeddings.size(1)))

    def write(tmp: Path) -> dict[str, Any]:
        graph = contents.graph
        tensors = {
            "embeddings": contents.embeddings.float().contiguous(), "passage_offsets": write_passages(contents.passages, tmp / PASSAGES),
            "edge_index": graph.edge_index.long().contiguous(), "edge_weight": graph.edge_weight.float().contiguous(),
            "edge_source": graph.edge_source.long().contiguous(), "log_phi": contents.log_phi.double().contiguous(),
        }
        for key in ("z", "knn_edges"):
            if (value := getattr(contents, key)) is not None:
                tensors[key] = (value.float() if key == "z" else value.long()).contiguous()
        save_file(tensors, tmp / TENSORS)
        if f_theta is not None:
            save_file({k: v.contiguous() for k, v in f_theta.state_dict().items()}, tmp / F_THETA)
        if ann is not None:
            ann.save(tmp / ANN)
        if names := getattr(graph, "entity_names", []):
            (tmp / ENTITIES).write_text(json.dumps(names, ensure_ascii=False))
        return index_manifest(**{**fields, "ann": ann})

    return write_index_dir(directory, write)


def load_index(directory: str | Path, verify: bool = True) -> dict[str, Any]:
    """The constructor arguments of the index saved in ``directory``. Every file's size is checked
    and, unless ``verify`` is ``False``, its SHA-256; tensors are memory-mapped. Raises
    :class:`IndexFormatError` naming the file for anything missing, corrupt or too new."""
    directory = Path(directory)
    manifest = read_manifest(directory, verify)
    try:
        return _read_files(directory, manifest)
    except IndexFormatError:
        raise
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise IndexFormatError(directory, f"inconsistent index ({err})") from None


def _read_files(directory: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    tensors = _load_tensors(directory / TENSORS)
    counts = manifest["counts"]
    n, dim = int(counts["passages"]), int(counts["dim"])
    num_nodes = n + int(counts.get("entities", 0))  # an entity graph's entity nodes follow the passages
    expected = {"embeddings": (n, dim), "passage_offsets": (n + 1,), "log_phi": (num_nodes,), "edge_index": (2, int(counts["edges"]))}
    for key, shape in expected.items():
        if key not in tensors or tuple(tensors[key].shape) != shape:
            raise IndexFormatError(directory / TENSORS, f"'{key}' missing or not of shape {shape}")
    edge_index = tensors["edge_index"]
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= num_nodes):
        raise IndexFormatError(directory / TENSORS, "edge_index refers to entity nodes or passages that do not exist")
    graph = Data(x=tensors["embeddings"], edge_index=edge_index, edge_weight=tensors["edge_weight"],
                 edge_source=tensors["edge_source"], num_nodes=n)
    attach_entity_nodes(graph, json.loads((directory / ENTITIES).read_text()) if num_nodes > n else [])
    phi = PhiSpec(**manifest["phi"])
    f_theta, info = None, manifest.get("f_theta")
    if info is not None:
        arch = info["architecture"]
        f_theta = PoincareEncoder(arch["in_dim"], arch["out_dim"], arch["hidden_dim"], phi.curvature)
        f_theta.load_state_dict(_load_tensors(directory / F_THETA))
        f_theta.eval()
        if "z" not in tensors or tuple(tensors["z"].shape) != (num_nodes, arch["out_dim"]):
            raise IndexFormatError(directory / TENSORS, f"'z' missing or not of shape {(num_nodes, arch['out_dim'])}")
    ann = manifest.get("ann", ann_info(None))
    stored_ann = None
    if ann["kind"] != "exact":
        if ANN not in manifest.get("files", {}):
            raise IndexFormatError(directory / ANN, f"missing: the manifest names a {ann['kind']} ANN index")
        stored_ann = StoredANN(directory / ANN, ann["kind"], ann["params"])
    contents = IndexContents(PassageStore(path=directory / PASSAGES, offsets=tensors["passage_offsets"]), tensors["embeddings"], graph,
                             tensors["log_phi"], manifest["graph"]["statistics"], manifest["corpus_hash"], tensors.get("z"),
                             tensors.get("knn_edges"))
    return {"contents": contents, "encoder": manifest["encoder"], "phi": phi, "graph_spec": manifest["graph"]["builders"],
            "f_theta": f_theta, "f_theta_info": info, "knobs": manifest.get("knobs", {}), "created": manifest.get("created"),
            "ann": stored_ann}


def _load_tensors(path: Path) -> dict[str, Tensor]:
    try:
        return load_file(path)
    except Exception as err:  # noqa: BLE001 - safetensors' own errors: truncated header, bad offsets...
        raise IndexFormatError(path, f"unreadable safetensors file ({err})") from None
