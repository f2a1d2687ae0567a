"""The whole server from what an operator names: a key or a keyring, a scheme and an engine
(:class:`ServerConfig`), built by :func:`create_app`. ``samark serve`` only parses its
options into a ``ServerConfig``; Python serves the same way::

    from samark.serving import ServeSettings, ServerConfig, create_app

    access = ServeSettings(tokens=frozenset({"a-token-of-16-chars-or-more"}))
    app = create_app(ServerConfig(key="my.key", engine="transformers", access=access))
    # uvicorn.run(app)

The engine loads when the app is built (not in the first request); the key never leaves
the scheme.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samark.errors import SamarkError
from samark.keys import WatermarkKey
from samark.keys.samark_material import check_cells
from samark.models import DEFAULT_GENERATOR
from samark.schemes.base import OLDER_KEYS_SCHEME
from samark.serving.settings import ServeSettings

if TYPE_CHECKING:
    from fastapi import FastAPI
    from transformers import PreTrainedTokenizerBase

    from samark.embed import Embedder
    from samark.provenance import ProvenanceRecord
    from samark.sampling.base import Engine
    from samark.sampling.engines import EngineSpec
    from samark.schemes.base import Watermark
    from samark.serving.upstream import Upstream
    from samark.serving.worker import Keys

log = logging.getLogger("samark.serve")


@dataclass(frozen=True)
class ServerConfig:
    """What one server serves, and to whom (``access``: tokens and limits).

    ``key`` (a key file or a loaded key) or ``keyring`` (a keyring folder: it marks with
    its current key, or ``label``, writes a request's ``payload`` with a ring of 2**b
    keys, and detects against every key). ``engine`` is an engine spec
    (``ENGINE[:MODEL]``: :mod:`samark.sampling.engines`; MODEL left out: ``generator``;
    None: the scheme's own engine). ``candidates``, ``statistic``, ``centring`` and
    ``cells`` (keyed semantic cells, 0: static pivots; None: the scheme's default;
    generation and detection alike, the keyring's too) are options a scheme declares
    (``SchemeInfo.candidates`` / ``options``; ``candidates`` None: the scheme's default);
    ``scheme_params`` passes any other parameter of the scheme (to the served scheme, each
    payload's and the keyring's detector alike).
    """

    access: ServeSettings
    key: Path | str | WatermarkKey | None = None
    keyring: Path | str | None = None
    label: str | None = None
    scheme: str = OLDER_KEYS_SCHEME
    engine: str | None = None
    generator: str = DEFAULT_GENERATOR
    candidates: int | None = None
    statistic: str | None = None
    alpha: float = 0.01
    centring: Path | str | None = None
    cells: int | None = None
    scheme_params: Mapping[str, object] = field(default_factory=dict)
    #: the provenance record's URL (docs/provenance.md): every served sentence is
    #: recorded under the completion's id before it is sent, and ``/v1/detect`` with
    #: ``details`` reports each sentence's provenance; None: no record. Left out of the
    #: config's repr: a PostgreSQL URL may hold a password
    record: str | None = field(default=None, repr=False)
    #: keep each served sentence's text in the record (off: keyed hashes and embeddings)
    store_text: bool = False

    def __post_init__(self) -> None:
        from samark.schemes.base import engine_for, scheme_info
        from samark.schemes.options import refuse_undeclared

        if (self.key is None) == (self.keyring is None):
            raise SamarkError("serve a key or a keyring (one of them)")
        if self.label is not None and self.keyring is None:
            raise SamarkError("label chooses a key of a keyring")
        info = scheme_info(self.scheme)  # an unknown scheme is named here
        if not info.detectable:
            raise SamarkError(f"{self.scheme} writes no watermark: it has no key and no detector")
        if self.store_text and self.record is None:
            raise SamarkError("store_text keeps the served text in a record: name the record")
        if self.record is not None:
            from samark.provenance import check_url

            if self.keyring is not None:
                raise SamarkError(
                    "a record is kept under one key; a keyring's record is not supported yet"
                )
            check_url(self.record)  # an unknown or malformed URL is named here
        if self.candidates is not None and self.candidates < 1:
            raise SamarkError(f"candidates must be at least 1, got {self.candidates}")
        if not 0 < self.alpha < 1:
            raise SamarkError(f"alpha must be between 0 and 1, got {self.alpha}")
        refuse_undeclared(
            self.scheme,
            info.options,
            {"statistic": self.statistic, "cells": self.cells, "centring": self.centring},
        )
        engine_for(self.scheme, self.engine)  # an engine it cannot write through is named
        if self.cells is not None:
            try:
                check_cells(self.cells)
            except ValueError as exc:
                raise SamarkError(str(exc)) from None
        if self.centring is not None and not Path(self.centring).is_file():
            raise SamarkError(f"centring reference {self.centring} does not exist")

    @property
    def engine_spec(self) -> EngineSpec:
        """The engine the scheme writes through."""
        from samark.schemes.base import engine_for

        return engine_for(self.scheme, self.engine)

    @property
    def generator_model(self) -> str:
        """The generator whose tokenizer the server counts and renders chats with: the
        local engine's model, or ``generator`` (a server's engine: its model's tokenizer)."""
        spec = self.engine_spec
        return spec.model if spec.model and spec.engine != "openai" else self.generator


def create_app(config: ServerConfig) -> FastAPI:
    """The whole application: the engine (loaded now), the scheme under the key, the
    keyring's payload schemes and ring detector, the chat template and token counts of
    the generator's tokenizer, and an upstream pass-through when the engine is a server.
    Raises :class:`~samark.errors.SamarkError` for what cannot be served."""
    from samark.serving.app import scheme_app, tokenizer_chat_renderer

    key, label = _marking_key(config)
    engines = _engines(config)
    build = _builder(config, engines[0] if engines else None)
    scheme = build(key, ())
    tokenizer = scheme.tokenizer or _generator_tokenizer(config.generator_model)
    try:
        render_chat = tokenizer_chat_renderer(tokenizer)
    except SamarkError:
        render_chat = None
        log.warning("the generator's tokenizer has no chat template: /v1/chat/completions is off")

    def count_tokens(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    record = _record(config, key, scheme)

    def close() -> None:  # an engine's own processes (vLLM's) stop with the server
        held = [*engines, scheme.engine]
        for engine in {id(e): e for e in held if e is not None}.values():
            close_engine(engine)
        if record is not None:
            record.close()

    return scheme_app(
        scheme,
        config.access,
        render_chat=render_chat,
        count_tokens=scheme.token_counter or count_tokens,
        upstream=_upstream(engines[-1] if engines else None, config.access),
        keys=None if config.keyring is None else _keys(config, label, build, scheme.embedder),
        on_close=close,
        record=record,
        store_text=config.store_text,
    )


def _record(config: ServerConfig, key: WatermarkKey, scheme: Watermark) -> ProvenanceRecord | None:
    """The record of ``config`` under the marking key, with the scheme's embedder (a
    token scheme has none: the key's own, loaded)."""
    if config.record is None:
        return None
    from samark.embed import load_embedder
    from samark.provenance import ProvenanceRecord
    from samark.provenance.store import redact

    embedder = scheme.embedder or load_embedder(key.embedder.name)
    key.check_embedder(embedder.identity)
    record = ProvenanceRecord.open(config.record, key, embedder)
    kept = "with their text" if config.store_text else "keyed hashes and embeddings, no text"
    log.info("recording served sentences (%s) in %s", kept, redact(config.record))
    return record


def close_engine(engine: Engine) -> None:
    """Stop what ``engine`` runs beyond this process's objects (a batching queue's
    thread, vLLM's processes); engines without such things have nothing to stop."""
    engine.close()


#: builds the served scheme (or a payload's) from its key and its flag pattern
SchemeBuilder = Callable[[WatermarkKey, tuple[int, ...]], "Watermark"]


def _builder(config: ServerConfig, engine: Engine | None) -> SchemeBuilder:
    """How every served scheme is built: the config's parameters, one engine and one
    embedder shared by the served key's scheme and every payload's."""
    from samark.schemes.base import create_scheme, scheme_info

    info = scheme_info(config.scheme)
    params: dict[str, Any] = {"generator": config.generator_model, "alpha": config.alpha}
    if info.candidates and config.candidates is not None:
        params["candidates"] = config.candidates
        params["max_new_sentences"] = config.access.default_sentences
    if engine is not None:
        params["engine"] = engine
    params.update(_scheme_fields(config))
    shared: list[Watermark] = []

    def build(key: WatermarkKey, flags: tuple[int, ...]) -> Watermark:
        extra: dict[str, Any] = {"payload_flags": flags} if flags else {}
        if shared and shared[0].embedder is not None:
            extra["embedder"] = shared[0].embedder
        try:
            scheme = create_scheme(config.scheme, key=key, **params, **extra)
        except (TypeError, ValueError) as exc:
            raise SamarkError(f"{config.scheme}: {exc}") from None
        shared.append(scheme)
        return scheme

    return build


def _scheme_fields(config: ServerConfig) -> dict[str, Any]:
    """The scheme's parameters that the served scheme, each payload's and the keyring's
    detector share, so that a ring detects as the served scheme would: the declared
    statistic, centring reference and keyed cells (left out where the config leaves
    them), then ``scheme_params`` (which win)."""

    fields: dict[str, Any] = {}
    if config.statistic is not None:
        fields["statistic"] = config.statistic
    if config.centring is not None:
        fields["centring"] = str(config.centring)
    if config.cells is not None:
        fields["cells"] = config.cells
    fields.update(config.scheme_params)
    return fields


def _engines(config: ServerConfig) -> list[Engine]:
    """The candidate engine a candidate-picking scheme draws from, loaded now: for concurrent
    requests on a local engine, a batching queue in front of it (first in the list) and
    the engine itself (last). Other schemes load their own engine (an empty list)."""
    from samark.sampling.base import BatchEngine
    from samark.sampling.batching import BatchingEngine
    from samark.sampling.engines import load_engine
    from samark.schemes.base import scheme_info

    if not scheme_info(config.scheme).candidates:
        return []
    spec = config.engine_spec
    log.info("loading %s (%s engine) ...", spec.model or config.generator, spec.engine)
    engine = load_engine(spec, generator=config.generator)
    # a server's engine batches concurrent requests on its own; a local one, in a queue
    if config.access.concurrent_generations > 1 and isinstance(engine, BatchEngine):
        return [BatchingEngine(engine), engine]
    return [engine]


def _upstream(engine: Engine | None, access: ServeSettings) -> Upstream | None:
    """The pass-through of ``"watermark": false`` requests: the engine's server, where
    candidates come from one."""
    from samark.openai_client import async_openai_client
    from samark.sampling.openai_server import OpenAICompletionsEngine
    from samark.serving.upstream import Upstream

    if not isinstance(engine, OpenAICompletionsEngine):
        return None
    client = async_openai_client(engine.base_url, timeout=access.request_timeout_s)
    return Upstream(client, engine.model)


def _generator_tokenizer(generator: str) -> PreTrainedTokenizerBase:
    """The generator's tokenizer, where the engine is a server's (its chat template and
    token counts are still the generator's)."""
    from transformers import AutoTokenizer

    from samark.models import resolve_generator

    return AutoTokenizer.from_pretrained(resolve_generator(generator)[1])


def _marking_key(config: ServerConfig) -> tuple[WatermarkKey, str | None]:
    """The key that marks unless a request names a payload, and its keyring label."""
    from samark.keys.keyring import Keyring

    if config.keyring is None:
        assert config.key is not None
        key = config.key
        return (key if isinstance(key, WatermarkKey) else WatermarkKey.load(Path(key))), None
    ring = Keyring.load(Path(config.keyring))
    entry = ring.entry(config.label) if config.label is not None else ring.current()
    if not entry.active:
        raise SamarkError(f"key {entry.label!r} is retired: it detects, but marks no text")
    return ring.key(entry.label), entry.label


def _keys(
    config: ServerConfig, label: str | None, build: SchemeBuilder, embedder: Embedder | None
) -> Keys:
    """A keyring's part: with a ring of 2**b keys one scheme per payload value (the
    value's key, and its flags where the ring writes flag bits), and the ring's detector
    (detecting as the served scheme does, with its ``embedder``)."""
    from samark.detection.ring_detector import RingDetector, refuse_flag_payload
    from samark.keys.keyring import Keyring
    from samark.schemes.base import SharedResources
    from samark.serving.worker import Keys

    assert config.keyring is not None
    ring = Keyring.load(Path(config.keyring))
    refuse_flag_payload(config.scheme, ring.flag_bits)  # before any key's scheme is built
    payloads: dict[int, tuple[str, Watermark]] = {}
    for value in range(2**ring.payload_bits if ring.payload_bits else 0):
        entry = ring.entries[value >> ring.flag_bits]
        if entry.active:
            flags = ring.payload_flags(value) if ring.flag_bits else ()
            payloads[value] = (entry.label, build(ring.key(entry.label), flags))
    params = _scheme_fields(config)  # scheme_params too: they may change detection
    alpha = params.pop("alpha", config.alpha)  # the served scheme's level, as it has it
    try:
        shared = SharedResources(config.generator_model, embedder)
        detector = RingDetector.from_ring(ring, config.scheme, shared=shared, alpha=alpha, **params)
    except (TypeError, ValueError) as exc:
        raise SamarkError(str(exc)) from None
    log.info(
        "keyring %s: marking with %r, detecting against %d keys%s",
        config.keyring,
        label,
        len(ring),
        f", payloads of {ring.payload_bits} bits" if payloads else "",
    )
    return Keys(label=label, payloads=payloads, ring=detector)
