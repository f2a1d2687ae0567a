"""How the commands load what they run: a scheme of a key file, a keyring's key or
detector, and the options they share."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from samark.cli.common import (
    err,
    fail,
    load_key,
    refuse_scheme_options,
)
from samark.errors import SamarkError
from samark.models import DEFAULT_GENERATOR
from samark.schemes.base import OLDER_KEYS_SCHEME
from samark.schemes.catalog import option_help

if TYPE_CHECKING:
    from samark.detection.ring_detector import RingDetector
    from samark.sampling.engines import EngineSpec
    from samark.schemes.base import Watermark


EngineOption = Annotated[
    str | None,
    typer.Option(
        "--engine",
        help="Where the generator runs, ENGINE[:MODEL]: 'transformers' (local, the default), "
        "'vllm' (in-process vLLM: a GPU, or the CPU recipe of docs/usage.md; about a minute "
        "to start), 'openai:URL#MODEL' or 'URL#MODEL' (an OpenAI-compatible server). MODEL "
        "left out: --generator. Default: the scheme's own (transformers, but for a scheme "
        "that writes only through vLLM).",
    ),
]
#: the engine's spellings before --engine named it in every command, kept working
DeprecatedEngineOption = Annotated[str | None, typer.Option(hidden=True)]


def chosen_engine(engine: str | None, **deprecated: str | None) -> str | None:
    """The ``--engine`` spec, or one given by a command's former spelling of it (``--sampler``,
    ``--upstream``: the same spec), which still works with a warning."""
    for old, spec in deprecated.items():
        if spec is None:
            continue
        if engine is not None:
            raise fail(f"--{old} is the former name of --engine: give --engine only")
        err.print(f"[yellow]warning:[/] --{old} is deprecated: use --engine {spec!r}")
        engine = spec
    return engine


def scheme_engine(scheme_name: str, engine: str | None) -> EngineSpec | None:
    """The engine ``--engine`` names for the scheme (None: the scheme's own), or a clear
    error (exit 2) before any model loads."""
    if engine is None:
        return None
    from samark.schemes.base import engine_for

    try:
        return engine_for(scheme_name, engine)
    except SamarkError as exc:
        raise fail(str(exc)) from None


def load_scheme(
    key: Path,
    name: str = OLDER_KEYS_SCHEME,
    generator: str = DEFAULT_GENERATOR,
    engine: str | None = None,
    statistic: str | None = None,
    **fields: Any,
) -> Watermark:
    """A scheme that chooses among candidates (``can(name, "candidates")``) with its
    config ``fields`` (those left out keep the scheme's own defaults),
    the detection ``statistic`` (the scheme's own default unless given) and an
    optional candidate ``engine`` spec (``ENGINE[:MODEL]``; None: the local generator)."""
    from samark.sampling import load_engine
    from samark.schemes import create_scheme
    from samark.schemes.base import engine_for

    try:
        loaded = None
        if engine:
            loaded = load_engine(engine_for(name, engine), generator=generator)
        params: dict[str, Any] = {"generator": generator, **fields}
        if statistic is not None:
            params["statistic"] = statistic
        if loaded is not None:
            params["engine"] = loaded
        return create_scheme(name, key=load_key(key), **params)
    except (SamarkError, ValueError) as exc:
        raise fail(str(exc)) from None


def can(name: str, capability: str) -> bool:
    """Whether registered scheme ``name`` declares ``capability`` (a
    :class:`~samark.schemes.catalog.SchemeInfo` field: ``candidates``, ``statistics``,
    ``payload_flags``); False for an unknown name (its loader then says so)."""
    from samark.schemes.base import scheme_info

    try:
        info = scheme_info(name)
    except (KeyError, ValueError, SamarkError):
        return False
    return bool(dataclasses.asdict(info)[capability])


def schemes_that(capability: str) -> list[str]:
    """The registered schemes that declare ``capability``, for messages."""
    from samark.schemes.base import scheme_names

    return [n for n in scheme_names() if can(n, capability)]


SchemeOption = Annotated[
    str | None,
    typer.Option(
        "--scheme",
        help="Watermarking scheme (`samark schemes list`); its key derives from the key file. "
        "Default: the scheme the key was made for (samark for an older key that names none); "
        "another is refused unless --any-scheme. Each scheme takes the options it declares "
        "(`samark schemes list`).",
        show_default=False,
    ),
]

AnySchemeOption = Annotated[
    bool,
    typer.Option(
        "--any-scheme",
        help="Research: use the key with a --scheme it was not made for (its texts are then "
        "read as another scheme's).",
    ),
]


def resolve_scheme(
    scheme: str | None,
    key: Path | None = None,
    keyring: Path | None = None,
    *,
    any_scheme: bool = False,
) -> str:
    """The scheme a command marks or detects with: ``scheme`` if given, else the one the
    key (or the ring's keys) was made for, else ``samark``. A ``scheme`` the key was not
    made for is refused, naming the key's, unless ``any_scheme``. A key file that cannot be
    read is left for the command to report."""
    from samark.schemes.base import OLDER_KEYS_SCHEME, scheme_names

    made_for = _made_for(key, keyring)
    if scheme is None:
        return made_for or OLDER_KEYS_SCHEME
    if scheme not in scheme_names():  # before --any-scheme: no flag makes it known
        raise fail(f"unknown scheme {scheme!r}; choose one of: {', '.join(scheme_names())}")
    if made_for is not None and scheme != made_for and not any_scheme:
        where = (
            f"the keyring {keyring}'s keys were" if keyring is not None else f"the key {key} was"
        )
        raise fail(
            f"{where} made for {made_for}, not {scheme}: detecting its texts as {scheme} would "
            f"not find them. Leave --scheme out (the key's is used), or add --any-scheme to "
            f"use it for {scheme} on purpose"
        )
    return scheme


def _made_for(key: Path | None, keyring: Path | None) -> str | None:
    from samark.keys import WatermarkKey
    from samark.keys.keyring import Keyring

    try:
        if keyring is not None:
            ring = Keyring.load(keyring)
            schemes = {ring.key(e.label).made_for() for e in ring.entries}
            if len(schemes) > 1:
                names = ", ".join(sorted(str(s) for s in schemes))
                raise fail(
                    f"the keyring {keyring}'s keys were made for different schemes ({names})"
                )
            return next(iter(schemes), None)
        if key is not None and key.is_file():
            return WatermarkKey.load(key).made_for()
    except SamarkError:
        return None  # the command reports an unreadable key or ring as it always has
    return None


def load_other_scheme(name: str, key: Path, **params: Any) -> Watermark:
    """A registered scheme that does not pick among candidates, keyed by the key file's
    secret."""
    from samark.schemes import create_scheme

    try:
        _require_detector(name)
        return create_scheme(name, key=load_key(key), **params)
    except (SamarkError, ValueError, TypeError) as exc:
        raise fail(str(exc)) from None


def _require_detector(name: str) -> None:
    """Fail unless scheme ``name`` has a key and a detector (the registry names an
    unknown scheme)."""
    from samark.schemes.base import scheme_info

    if not scheme_info(name).detectable:
        raise fail(f"{name} writes no watermark: it has no key and no detector")


CentringOption = Annotated[
    Path | None,
    typer.Option(
        "--centring",
        help=option_help("centring"),
    ),
]


def centring_fields(centring: Path | None) -> dict[str, Any]:
    """The config field of ``--centring`` (checked before any model loads)."""
    if centring is None:
        return {}
    if not centring.is_file():
        raise fail(f"centring reference {centring} does not exist")
    return {"centring": str(centring)}


KeyringOption = Annotated[
    Path | None,
    typer.Option(
        "--keyring",
        help="A keyring folder (`samark keyring new`) instead of --key: every key of it.",
    ),
]


def load_ring_detector(
    ring: Path,
    name: str,
    *,
    statistic: str | None,
    alpha: float,
    at: str | None = None,
    generator: str = DEFAULT_GENERATOR,
    **fields: Any,
) -> RingDetector:
    """A detector for every key of keyring ``ring`` with scheme ``name`` (with the
    commands' statistic and config ``fields``; ``generator`` is the tokenizer of a scheme
    with a token layer)."""
    from samark.detection.ring_detector import RingDetector
    from samark.keys.keyring import Keyring

    params: dict[str, Any] = {"generator": generator, **fields}
    refuse_scheme_options(name, statistic=statistic)
    if statistic is not None:
        params["statistic"] = statistic
    try:
        _require_detector(name)
        return RingDetector.from_ring(Keyring.load(ring), name, alpha=alpha, at=at, **params)
    except (SamarkError, ValueError, TypeError) as exc:
        raise fail(str(exc)) from None


def ring_key_file(
    ring: Path, label: str | None, payload: int | None
) -> tuple[Path, dict[str, str | int], tuple[int, ...]]:
    """The key file of ``ring`` that marks text: the key ``label``, the one that writes
    ``payload``, or the current key; what the output says of it (never the secret); and
    the flags that write the payload's flag bits (empty: none)."""
    from samark.keys.keyring import Keyring, KeyringError

    if label is not None and payload is not None:
        raise fail("give --label or --payload, not both")
    flags: tuple[int, ...] = ()
    try:
        opened = Keyring.load(ring)
        if payload is not None:
            entry = opened.payload_entry(payload)
            flags = opened.payload_flags(payload)
        elif label is not None:
            entry = opened.entry(label)
            if not entry.active:
                raise KeyringError(f"key {label!r} is retired: it detects, but marks no text")
        else:
            entry = opened.current()
    except SamarkError as exc:
        raise fail(str(exc)) from None
    said: dict[str, str | int] = {"key_label": entry.label}
    if payload is not None:
        said["payload"] = payload
    return opened.path / entry.file, said, flags


def human_heads(source: str, field: str, sentences: int, limit: int) -> list[str]:
    """Up to ``limit`` human texts of ``source`` (a data set name or a JSONL / Parquet
    file's ``field``), each its first ``sentences`` sentences (0: whole): what
    ``check-key`` scores and ``keyring new --screen`` screens keys on."""
    from samark.datasets import leading_sentences

    texts = _human_texts(source, field, limit * 2 if sentences else limit)
    if sentences:
        heads = leading_sentences(
            texts, limit=limit, stop=sentences, min_sentences=min(3, sentences)
        )
        texts = [" ".join(sents) for sents in heads]
    return texts[:limit]


def _human_texts(source: str, field: str, limit: int) -> list[str]:
    """Up to ``limit`` texts of a data set by name, or of a JSONL / Parquet file's
    ``field``; a record that cannot be read, or has no such field, is an error (exit 2)
    naming its line (JSONL) or row (Parquet)."""
    from samark.datasets import dataset_names, load_dataset

    path = Path(source).expanduser()
    if path.suffix in (".jsonl", ".parquet"):
        if not path.is_file():
            what = "is a folder, not a file" if path.is_dir() else "no such file"
            raise fail(f"{source}: {what}")
        try:
            return _file_texts(path, field, limit)
        except SamarkError as exc:
            raise fail(str(exc)) from None
    if source not in dataset_names():
        raise fail(
            f"{source!r} is neither a .jsonl / .parquet file nor a data set "
            f"({', '.join(dataset_names())})"
        )
    try:
        return [doc.text for doc in load_dataset(source)[:limit]]
    except SamarkError as exc:
        raise fail(str(exc)) from None


def _file_texts(path: Path, field: str, limit: int) -> list[str]:
    """The first ``limit`` records' ``field`` of a JSONL or Parquet file."""
    from samark.detection.record_files import (
        UnreadableRecord,
        no_text_field,
        numbered_jsonl,
        read_parquet,
    )

    if path.suffix == ".parquet":
        numbered = ((f"{path}, row {i}", r) for i, r in enumerate(read_parquet(path), 1))
    else:
        numbered = ((f"{path}:{n}", r) for n, r in numbered_jsonl(path))
    texts: list[str] = []
    for place, record in numbered:
        if isinstance(record, UnreadableRecord):
            raise SamarkError(f"{place}: {record['error']}")
        text = record.get(field)
        if not isinstance(text, str):
            raise SamarkError(f"{place}: {no_text_field(field)}")
        texts.append(text)
        if len(texts) == limit:
            break
    if not texts:
        raise SamarkError(f"{path} holds no records")
    return texts
