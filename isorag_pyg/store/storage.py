"""An index saved to and loaded from its directory (:mod:`~isorag_pyg.store.directory`): a JSON
manifest with a checksum of every file, written atomically under the directory's writer lock,
beside ``passages.jsonl``, ``tensors.safetensors`` and, with f_θ, ``f_theta.safetensors``, with an
ANN index ``ann.safetensors``, with an entity graph ``entities.json`` (its entity nodes' names,
rows after the passages, and the entities only one passage mentions).

Nothing here unpickles: tensors are safetensors, passages JSON lines, the manifest JSON, so
opening an index from an untrusted source never executes code. The checksums detect corrupt,
truncated or edited files; they do not authenticate who wrote them.
"""
from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from safetensors.torch import load_file, save_file
from torch import Tensor

from isorag_pyg import defaults
from isorag_pyg.datasets.corpus_files import check_max_tokens
from isorag_pyg.graph.builders import DIRECTED_BUILDERS, TITLES_READ_AS_NAMES_SINCE
from isorag_pyg.graph.entity_graph import with_entity_nodes
from isorag_pyg.knobs import PhiSpec
from isorag_pyg.retrieval.ann import ANNIndex
from isorag_pyg.store.contents import IndexContents, StoredGraph
from isorag_pyg.store.directory import _manifest_digest, read_manifest, write_index_dir
from isorag_pyg.store.ids import next_number
from isorag_pyg.store.layout import ANN, ENTITIES, F_THETA, FORMAT_VERSION, MANIFEST, PASSAGES, TENSORS, IndexFormatError
from isorag_pyg.store.locking import check_not_stale, index_lock, read_generation
from isorag_pyg.store.origin import Origin, saved_origin
from isorag_pyg.store.passages import PassageStore, write_passages
from isorag_pyg.store.sealed import SealedCopy
from isorag_pyg.store.snapshot import OpenedVersion
from isorag_pyg.store.validation import check_finite_weights, check_index_tensors, require_listed
from isorag_pyg.utils.bridging import bridging_from_ball
from isorag_pyg.utils.files import file_sha256
from isorag_pyg.version import __version__

if TYPE_CHECKING:
    from isorag_pyg.nn.poincare_encoder import PoincareEncoder

log = logging.getLogger(__name__)

#: Re-exported: what callers and tests take from here.
__all__ = ["FORMAT_VERSION", "MANIFEST", "IndexFormatError", "Origin", "_manifest_digest", "file_sha256", "load_index", "read_manifest",
           "save_index", "write_index_dir"]


@dataclass(frozen=True)
class StoredANN:
    """An ANN index still in its file: an opened index reads it on first use, from a private copy
    of the file it opened (its digest checked then, against ``sha256``; ``None``: not verified),
    so that a large ANN index is not held twice (copy and FAISS) while unused."""

    path: Path
    kind: str
    params: dict[str, Any]
    handle: Any = None  # the file of the version the index was opened from
    sha256: str | None = None

    def open(self, num_passages: int, dim: int) -> ANNIndex:
        """The index, checked against its digest and the passages it must cover."""
        try:
            if self.handle is None or self.handle.closed:
                ann = ANNIndex.load(self.path)
            else:
                copy = SealedCopy(self.handle.fileno(), self.path, digest=self.sha256 is not None)
                try:
                    if self.sha256 is not None and copy.sha256 != self.sha256:
                        raise IndexFormatError(self.path, "checksum mismatch: changed since the index was opened")
                    ann = ANNIndex.load(copy.path)
                finally:
                    copy.close()
        except IndexFormatError:
            raise
        except Exception as err:  # noqa: BLE001 - safetensors' or FAISS's own errors
            raise IndexFormatError(self.path, f"unreadable ANN index ({err})") from None
        if (ann.kind, ann.num_passages, ann.dim) != (self.kind, num_passages, dim):
            raise IndexFormatError(self.path, f"a {ann.kind} index of {ann.num_passages} vectors of size {ann.dim}, "
                                              f"not the manifest's {self.kind} over {num_passages} passages")
        return ann


@dataclass(frozen=True)
class StoredFTheta:
    """f_θ's weights as read (and checked finite) from its file: an opened index builds the
    :class:`~isorag_pyg.nn.poincare_encoder.PoincareEncoder` (and imports geoopt) on first use,
    which answering questions never needs."""

    path: Path
    weights: dict[str, Tensor]
    architecture: dict[str, Any]
    curvature: float

    def open(self) -> PoincareEncoder:
        """The encoder with these weights, in evaluation mode (:class:`IndexFormatError` when they do not fit it)."""
        from isorag_pyg.nn.poincare_encoder import PoincareEncoder

        arch = self.architecture
        try:
            f_theta = PoincareEncoder(arch["in_dim"], arch["out_dim"], arch["hidden_dim"], self.curvature)
            f_theta.load_state_dict(self.weights)
        except (KeyError, TypeError, ValueError, RuntimeError) as err:
            raise IndexFormatError(self.path, f"f_θ's weights do not fit its architecture ({err})") from None
        return f_theta.eval()


def ann_info(ann: ANNIndex | StoredANN | None) -> dict[str, Any]:
    """The manifest's ``ann`` entry: ``{"kind", "params"}`` (``exact``: no ANN index)."""
    return {"kind": "exact", "params": {}} if ann is None else {"kind": ann.kind, "params": ann.params}


def index_manifest(contents: IndexContents, encoder: dict[str, Any], phi: PhiSpec, graph_spec: dict[str, Any],
                   f_theta_info: dict[str, Any] | None, knobs: dict[str, dict[str, Any]], created: str,
                   ann: ANNIndex | StoredANN | None, next_id: int | None = None, max_tokens: int | None = None,
                   quarantined: list[str] | None = None, **_: Any) -> dict[str, Any]:
    """What :func:`save_index` records about an index (without the file checksums); takes the
    index's constructor arguments."""
    if max_tokens is not None:
        check_max_tokens(max_tokens)
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
        "next_id": next_number(contents.passages.ids) if next_id is None else next_id,
        "max_tokens": max_tokens,
        "quarantined": list(quarantined or []),
    }


def save_index(directory: str | Path, lock_timeout: float = defaults.LOCK_TIMEOUT_S, origin: Origin | None = None,
               **fields: Any) -> Origin:
    """Write an index, given as its constructor arguments, to ``directory`` atomically (see
    :func:`~isorag_pyg.store.directory.write_index_dir`) and return its new ``origin``: the
    resolved directory, the version (``generation``) saved there and its files.

    Holds the directory's writer lock (waiting up to ``lock_timeout`` seconds for another
    writer, then :class:`~isorag_pyg.store.locking.IndexLockTimeout`). Saving back to
    ``origin``'s directory is refused with :class:`~isorag_pyg.store.locking.StaleIndexError`
    if another writer saved a version there after ``origin``'s."""
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
            "bridging": contents.bridging.double().contiguous(),
        }
        if (backlink := getattr(graph, "edge_backlink", None)) is not None:
            tensors["edge_backlink"] = backlink.bool().contiguous()
        for key in ("z", "knn_edges"):
            if (value := getattr(contents, key)) is not None:
                tensors[key] = (value.float() if key == "z" else value.long()).contiguous()
        save_file(tensors, tmp / TENSORS)
        if f_theta is not None:  # an opened index's stored weights, as read, or a module's
            weights = f_theta.weights if isinstance(f_theta, StoredFTheta) else f_theta.state_dict()
            save_file({k: v.contiguous() for k, v in weights.items()}, tmp / F_THETA)
        if ann is not None:
            ann.save(tmp / ANN)
        names, unique = getattr(graph, "entity_names", []), getattr(graph, "unique_mentions", {})
        if names or unique:
            (tmp / ENTITIES).write_text(json.dumps({"names": names, "unique_mentions": unique}, ensure_ascii=False))
        return index_manifest(**{**fields, "ann": ann})

    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    with index_lock(directory, lock_timeout):
        if origin is not None and origin[0] == directory.resolve():
            check_not_stale(directory, origin[1])
        write_index_dir(directory, write, lock_timeout)
        return saved_origin(directory, read_generation(directory))


def load_index(directory: str | Path, verify: bool = True) -> dict[str, Any]:
    """The constructor arguments of the index saved in ``directory``, read from the one version
    there when it was opened, whatever writers do meanwhile (:mod:`~isorag_pyg.store.snapshot`).
    Every file's size is checked and, unless ``verify`` is ``False``, its SHA-256; the manifest's
    schema and the tensors' shapes, types and ranges are validated
    (:mod:`~isorag_pyg.store.validation`); every file is read from a private copy made when it
    was verified (:mod:`~isorag_pyg.store.sealed`), so nothing done to the files afterwards
    changes or breaks the index; ``origin`` records what was read. Raises
    :class:`IndexFormatError` naming the file for anything missing, corrupt or too new."""
    directory = Path(directory)
    with OpenedVersion(directory) as version:
        manifest = read_manifest(directory, verify, version, deferred=(ANN,))
        try:
            fields = _read_files(directory, manifest, version, verify)
        except IndexFormatError:
            raise
        except (KeyError, TypeError, ValueError, RuntimeError) as err:
            raise IndexFormatError(directory, f"inconsistent index ({err})") from None
        return {**fields, "origin": version.origin(manifest.get("generation", 0), manifest["files"])}


def _read_files(directory: Path, manifest: dict[str, Any], version: OpenedVersion, verify: bool) -> dict[str, Any]:
    info = manifest.get("f_theta")
    ann = manifest.get("ann", ann_info(None))
    counts, statistics = manifest["counts"], manifest["graph"]["statistics"]
    n, dim, entities = counts["passages"], counts["dim"], counts.get("entities", 0)  # entity nodes follow the passages
    require_listed(directory / MANIFEST, manifest, [TENSORS, PASSAGES] + ([F_THETA] if info is not None else [])
                   + ([ANN] if ann["kind"] != "exact" else []) + ([ENTITIES] if entities else []))
    stored_entities = ENTITIES in manifest["files"]
    tensors = _load_tensors(version.path(TENSORS), directory / TENSORS)
    builders = list(statistics.get("builders", manifest["graph"]["builders"]))
    check_index_tensors(directory / TENSORS, tensors, n, dim, counts["edges"], len(builders), manifest["files"][PASSAGES]["bytes"],
                        info["architecture"]["out_dim"] if info is not None else None, float(manifest["phi"].get("curvature", 1.0)), entities)
    names, unique = _read_entities(version.path(ENTITIES), n, directory) if stored_entities else ([], {})
    if len(names) != entities:
        raise IndexFormatError(directory / ENTITIES, f"{len(names)} entity names for {entities} entity nodes")
    if "edge_backlink" not in tensors and DIRECTED_BUILDERS.intersection(builders):
        log.warning("%s was saved before the graph recorded which edges are mentions walked backwards (backlinks): ISO-RAG walks "
                    "them at full weight, and takes no left-out bridge back for a question whose passages name it, until the index "
                    "is rebuilt or updated (isorag add)", directory)
    if "entity_graph" in builders and int(statistics.get("builders_version", 0)) < TITLES_READ_AS_NAMES_SINCE:
        log.warning("%s was built before the entity graph read titles title-cased and entity keys dropped accents: a question that "
                    "spells a title otherwise may miss its article until the index is rebuilt or updated (isorag add)", directory)
    graph = StoredGraph(with_entity_nodes(tensors["embeddings"], tensors["edge_index"], len(names)), tensors["edge_index"],
                        tensors["edge_weight"], tensors["edge_source"], n, builders, bool(statistics.get("leak", False)), names, unique,
                        tensors.get("edge_backlink"))
    phi = PhiSpec(**manifest["phi"])
    f_theta = None
    if info is not None:
        weights = _load_tensors(version.path(F_THETA), directory / F_THETA)
        check_finite_weights(directory / F_THETA, weights)
        f_theta = StoredFTheta(directory / F_THETA, weights, info["architecture"], phi.curvature)
    stored_ann = None if ann["kind"] == "exact" else StoredANN(directory / ANN, ann["kind"], ann["params"], version.keep(ANN),
                                                               manifest["files"][ANN]["sha256"] if verify else None)
    passages = PassageStore(path=directory / PASSAGES, offsets=tensors["passage_offsets"], read_from=version.path(PASSAGES))
    bridging = tensors.get("bridging")
    if bridging is None:  # saved before bridging scores existed: computed once here, saved with the next update
        bridging = bridging_from_ball(graph.edge_index, tensors.get("z"), phi, num_nodes=graph.num_nodes)
    contents = IndexContents(passages, tensors["embeddings"], graph, tensors["log_phi"], bridging, statistics, manifest["corpus_hash"],
                             tensors.get("z"), tensors.get("knn_edges"))
    return {"contents": contents, "encoder": manifest["encoder"], "phi": phi, "graph_spec": manifest["graph"]["builders"],
            "f_theta": f_theta, "f_theta_info": info, "knobs": manifest.get("knobs", {}), "created": manifest.get("created"),
            "ann": stored_ann, "next_id": manifest.get("next_id"), "max_tokens": manifest.get("max_tokens"),
            "quarantined": _quarantined(manifest.get("quarantined", []), passages, directory / MANIFEST)}


def _quarantined(ids: Any, passages: PassageStore, path: Path) -> list[str]:
    """The manifest's quarantined passage ids, each a passage of the index."""
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise IndexFormatError(path, "'quarantined' must be a list of passage ids")
    if unknown := [i for i in ids if passages.row_of(i) is None]:
        raise IndexFormatError(path, f"'quarantined' names {unknown[0]!r}, which is not a passage of the index")
    return ids


def _read_entities(path: Path, num_passages: int, directory: Path) -> tuple[list[str], dict[str, int]]:
    """An entity graph's entity node names and unique mentions (entity key -> passage row); an
    index written before unique mentions were kept (format 1) holds the names alone, as a list."""
    stored = json.loads(path.read_text())
    if isinstance(stored, list):
        log.warning("%s was saved before unique mentions were kept, so questions cannot seed the passage that alone "
                    "mentions an entity they name; rebuild the index (or add or remove a passage) to get them", directory)
        stored = {"names": stored, "unique_mentions": {}}
    names, unique = stored["names"], stored["unique_mentions"]
    if not isinstance(names, list) or not isinstance(unique, dict) or not all(isinstance(name, str) for name in names) or not all(
            isinstance(row, int) and not isinstance(row, bool) and 0 <= row < num_passages for row in unique.values()):
        raise ValueError("entity names must be a list of strings and unique mentions map keys to passage rows")
    return names, unique


def _load_tensors(path: Path, shown: Path | None = None) -> dict[str, Tensor]:
    """A safetensors file read from ``path`` (errors name ``shown``, default ``path``)."""
    try:
        return load_file(path)
    except Exception as err:  # noqa: BLE001 - safetensors' own errors: truncated header, bad offsets...
        raise IndexFormatError(shown or path, f"unreadable safetensors file ({err})") from None
