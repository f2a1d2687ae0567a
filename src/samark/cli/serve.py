"""``samark serve``: the OpenAI-compatible watermarking endpoint and detection API."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from samark.cli.app import app
from samark.cli.common import (
    KeyOption,
    err,
    fail,
)
from samark.cli.loading import (
    CentringOption,
    SchemeOption,
    can,
    centring_fields,
    load_other_scheme,
    load_ring_detector,
    load_scheme,
    ring_key_file,
    schemes_that,
)
from samark.errors import SamarkError
from samark.models import DEFAULT_GENERATOR


@app.command()
def serve(
    key: KeyOption = Path("samark.key"),
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    upstream: Annotated[
        str | None,
        typer.Option(
            help="Candidates from an OpenAI-compatible server, 'URL#MODEL' (vLLM, llama.cpp, "
            "transformers serve); it also answers '\"watermark\": false' requests. "
            "Default: the local generator."
        ),
    ] = None,
    generator: Annotated[
        str,
        typer.Option(help="Local generator preset or folder; with --upstream, its chat template."),
    ] = DEFAULT_GENERATOR,
    engine_name: Annotated[
        str | None,
        typer.Option(
            "--engine",
            help="Where the generator runs: 'transformers' (local, the default) or 'vllm' "
            "(in-process vLLM: a GPU, or the CPU recipe of docs/usage.md). Default: the "
            "scheme's own (vllm-gumbel writes through vLLM only).",
        ),
    ] = None,
    tokens_file: Annotated[
        Path | None,
        typer.Option(help="API bearer tokens, one per line (also: SAMARK_API_TOKENS=a,b)."),
    ] = None,
    admin_tokens_file: Annotated[
        Path | None,
        typer.Option(
            help="Admin tokens: may ask /v1/detect for localisation (also: SAMARK_ADMIN_TOKENS)."
        ),
    ] = None,
    no_auth: Annotated[
        bool, typer.Option("--no-auth", help="Serve without tokens (loopback demos only).")
    ] = False,
    candidates: Annotated[int, typer.Option(help="Candidates per sentence (N).")] = 64,
    sentences: Annotated[
        int, typer.Option(help="Sentences per completion unless a request sets max_sentences.")
    ] = 12,
    max_sentences: Annotated[int, typer.Option(help="Most sentences a request may ask.")] = 48,
    concurrency: Annotated[
        int,
        typer.Option(
            help="Generations that run at once; the local engine decodes their candidates "
            "in one batch (1: one at a time, first come first served)."
        ),
    ] = 8,
    statistic: Annotated[
        str | None,
        typer.Option(help="Detection statistic: scan (default), z or alignment."),
    ] = None,
    alpha: Annotated[float, typer.Option(help="Significance level of /v1/detect.")] = 0.01,
    timeout: Annotated[
        float,
        typer.Option(
            help="Seconds a request may wait and run. The default fits a default completion "
            "(N = 64, 12 sentences) with the local generator on a busy 2-core CPU "
            "(docs/serving.md)."
        ),
    ] = 1800.0,  # ServeSettings.request_timeout_s's default (samark.serving: the extra)
    max_body_bytes: Annotated[int, typer.Option(help="Largest request body.")] = 1_000_000,
    scheme_name: SchemeOption = "samark",
    keyring: Annotated[
        Path | None,
        typer.Option(
            "--keyring",
            help="Serve a keyring instead of --key: mark with its current key (or --label), "
            "write a request's 'payload' with a ring of 2**b keys, detect against every key.",
        ),
    ] = None,
    label: Annotated[
        str | None, typer.Option(help="With --keyring: mark with this key, not the current one.")
    ] = None,
    centring: CentringOption = None,
    detect_output: Annotated[
        str,
        typer.Option(
            help="What /v1/detect tells callers without an admin token: 'full' (p-value, "
            "statistic) or 'decision' (only whether it is marked). A public endpoint should "
            "answer 'decision': a p-value lets a forger climb to p < 0.01 in dozens of queries "
            "(docs/operators.md, Forgery)."
        ),
    ] = "full",
    detect_budget: Annotated[
        int | None,
        typer.Option(
            help="Texts a token without admin rights may have detected per hour (default: no "
            "limit). A forger with unlimited queries finds a human text flagged at alpha in "
            "about 1/alpha of them."
        ),
    ] = None,
) -> None:
    """Serve an OpenAI-compatible watermarking endpoint and a detection API for a keyed scheme.

    --scheme chooses the scheme; --candidates, --statistic and --upstream are SAMark's
    family's."""
    samark_family = can(scheme_name, "candidates")
    if not samark_family and upstream:
        raise fail(
            f"--upstream draws candidates ({', '.join(schemes_that('candidates'))}); "
            f"{scheme_name} writes with the local generator"
        )
    if centring is not None and not can(scheme_name, "statistics"):
        raise fail("--centring is SAMark's; leave it out for " + scheme_name)
    fields = centring_fields(centring)
    engine_name = _engine_for(scheme_name, engine_name, upstream)
    try:
        import uvicorn

        from samark.serving import ServeSettings, load_tokens
    except ImportError as exc:
        raise fail(
            f"`samark serve` needs the server extra ({exc}): pip install 'samark[server]'"
        ) from None
    _check_options(candidates, sentences, max_sentences, concurrency, timeout, alpha, statistic)
    try:
        settings = ServeSettings(
            tokens=load_tokens(tokens_file, "SAMARK_API_TOKENS"),
            admin_tokens=load_tokens(admin_tokens_file, "SAMARK_ADMIN_TOKENS"),
            auth=not no_auth,
            max_body_bytes=max_body_bytes,
            request_timeout_s=timeout,
            default_sentences=sentences,
            max_sentences=max_sentences,
            concurrent_generations=concurrency,
            detect_output=detect_output,  # type: ignore[arg-type]
            detect_budget=detect_budget,
        )
    except (SamarkError, ValueError) as exc:
        raise fail(str(exc)) from None
    if upstream and not upstream.startswith(("http://", "https://")):
        raise fail("--upstream is an OpenAI-compatible server: 'http(s)://HOST/v1#MODEL'")
    marked_by: dict[str, Any] = {}
    if keyring is not None:
        key, marked_by, _ = ring_key_file(keyring, label, None)
    elif label is not None:
        raise fail("--label chooses a key of a --keyring")
    scheme = _served_scheme(
        key,
        scheme_name,
        generator,
        upstream,
        statistic,
        candidates,
        sentences,
        alpha,
        concurrency,
        engine_name,
        fields,
    )
    on_close = None
    if engine_name == "vllm":  # vLLM's engine processes stop with the server
        from samark.sampling.vllm_engine import close_vllm_samplers

        on_close = close_vllm_samplers
    app_ = _served_app(
        scheme,
        settings,
        generator,
        upstream,
        timeout,
        keyring,
        marked_by,
        statistic,
        alpha,
        on_close,
    )
    if no_auth:
        err.print("[yellow]warning:[/] serving without API tokens (--no-auth)")
    uvicorn.run(app_, host=host, port=port, log_level="info", log_config=log_config())


def log_config() -> dict[str, Any]:
    """uvicorn's logging, with the server's own logger (``samark.serve``: one line per
    completion naming its key id, and errors) on uvicorn's stderr handler at INFO;
    without a handler of its own Python prints only its warnings."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    config: dict[str, Any] = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["samark.serve"] = {
        "handlers": ["default"],
        "level": "INFO",
        "propagate": False,
    }
    return config


def _served_scheme(
    key: Path,
    scheme_name: str,
    generator: str,
    upstream: str | None,
    statistic: str | None,
    candidates: int,
    sentences: int,
    alpha: float,
    concurrency: int,
    engine_name: str,
    fields: dict[str, Any],
) -> Any:
    """The served scheme: SAMark's family with its options and config ``fields`` (and, for
    concurrent requests on a local engine, a batching engine), any other scheme at its
    defaults."""
    if not can(scheme_name, "candidates"):  # any other scheme with a key and a detector
        scheme = load_other_scheme(scheme_name, key, generator=generator)
        err.print(f"loading {generator} ({engine_name}) ...")
        return scheme
    engine = None
    if upstream is None and (concurrency > 1 or engine_name == "vllm"):
        from samark.sampling.batching import BatchingSampler

        err.print(f"loading {generator} ({engine_name}) ...")
        try:
            local = _local_engine(engine_name, generator)
            # requests share batches; vLLM's engine takes one caller at a time
            engine = BatchingSampler(local) if concurrency > 1 else local
        except (SamarkError, ValueError, OSError) as exc:
            raise fail(str(exc)) from None
    scheme = load_scheme(
        key,
        scheme_name,
        generator,
        upstream,
        statistic,
        engine=engine,
        candidates=candidates,
        max_new_sentences=sentences,
        alpha=alpha,
        **fields,
    )
    if engine is None:
        err.print(f"loading {generator} ...")
    return scheme


def _check_options(
    candidates: int,
    sentences: int,
    max_sentences: int,
    concurrency: int,
    timeout: float,
    alpha: float,
    statistic: str | None,
) -> None:
    """The options' errors, named as typed, before any model loads."""
    from samark.schemes.samark.statistics import STATISTICS

    for option, value in (
        ("--candidates", candidates),
        ("--sentences", sentences),
        ("--max-sentences", max_sentences),
        ("--concurrency", concurrency),
    ):
        if value < 1:
            raise fail(f"{option} must be at least 1, got {value}")
    if sentences > max_sentences:
        raise fail(f"--sentences ({sentences}) must not exceed --max-sentences ({max_sentences})")
    if not timeout > 0:
        raise fail(f"--timeout must be more than 0 seconds, got {timeout}")
    if not 0 < alpha < 1:
        raise fail(f"--alpha must be between 0 and 1, got {alpha}")
    if statistic is not None and statistic not in STATISTICS:
        raise fail(f"--statistic is one of {', '.join(STATISTICS)}, not {statistic!r}")


def _engine_for(scheme_name: str, engine_name: str | None, upstream: str | None) -> str:
    """The engine a served scheme writes through: the one asked, if the scheme can, else
    its own default (SchemeInfo.engines)."""
    from samark.schemes.base import scheme_info

    try:
        engines = scheme_info(scheme_name).engines
    except (KeyError, ValueError, SamarkError):
        return engine_name or "transformers"  # an unknown scheme: its loader says so
    if upstream:
        if engine_name not in (None, "openai"):
            raise fail("--upstream draws candidates from a server; --engine runs a local one")
        return "openai"
    if engine_name is None:
        return next(e for e in engines if e != "openai")
    if engine_name not in ("transformers", "vllm"):
        raise fail(f"--engine is 'transformers' or 'vllm', not {engine_name!r}")
    if engine_name not in engines:
        raise fail(f"{scheme_name} writes through {' or '.join(engines)}, not {engine_name}")
    return engine_name


def _local_engine(engine_name: str, generator: str) -> Any:
    """The process's candidate engine for ``generator``."""
    if engine_name == "vllm":
        from samark.sampling.vllm_engine import load_vllm_sampler

        return load_vllm_sampler(generator)
    from samark.sampling.transformers_engine import load_transformers_sampler

    return load_transformers_sampler(generator)


def _served_app(
    scheme: Any,
    settings: Any,
    generator: str,
    upstream: str | None,
    timeout: float,
    keyring: Path | None,
    marked_by: dict[str, Any],
    statistic: str | None,
    alpha: float,
    on_close: Any = None,
) -> Any:
    """The application: the local generator loaded now (not in the first request) and
    lending its tokenizer (chat template, token counts), the upstream for unmarked
    pass-through, and the keyring."""
    from samark.serving import Upstream, create_app, tokenizer_chat_renderer

    try:
        from transformers import AutoTokenizer

        from samark.models import resolve_generator
        from samark.openai_client import async_openai_client

        # a sentence-level scheme's candidate engine, a token-level scheme's engine or model
        sampler = getattr(scheme, "sampler", None) or getattr(scheme, "engine", None) or scheme.lm
        tokenizer = (
            AutoTokenizer.from_pretrained(resolve_generator(generator)[1])
            if upstream
            else sampler.tokenizer
        )
        try:
            render = tokenizer_chat_renderer(tokenizer)
        except SamarkError:
            render = None
            err.print("[yellow]note:[/] no chat template: /v1/chat/completions is off")
        link = None
        if upstream:  # the sampler parsed URL#MODEL
            link = Upstream(async_openai_client(sampler.base_url, timeout=timeout), sampler.model)
        keys = None
        if keyring is not None:
            keys = _serve_keys(keyring, marked_by["key_label"], scheme, generator, statistic, alpha)
        return create_app(
            scheme,
            settings,
            render_chat=render,
            count_tokens=lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"]),
            upstream=link,
            keys=keys,
            on_close=on_close,
        )
    except SamarkError as exc:
        raise fail(str(exc)) from None


def _serve_keys(
    ring: Path, label: str, scheme: Any, generator: str, statistic: str | None, alpha: float
) -> Any:
    """A server's keyring: the ring's detector, and with a ring of 2**b keys one scheme
    per payload value: the served scheme's config (with the value's flags, for a ring with
    flag bits), generator (the layered mark's tokenizer), engine and embedder, under the
    value's key."""
    from samark.keys.ring import Keyring
    from samark.schemes import create_scheme
    from samark.serving import Keys

    opened = Keyring.load(ring)
    payloads: dict[int, tuple[str, Any]] = {}
    shared: dict[str, Any] = {"generator": generator, "config": scheme.config}
    if can(scheme.name, "candidates"):
        shared |= {"sampler": scheme.sampler, "embedder": scheme.embedder}
    if opened.flag_bits and not can(scheme.name, "payload_flags"):
        raise fail(f"this ring writes payload bits in SAMark's flags; {scheme.name} has none")
    if opened.payload_bits:
        for value in range(2**opened.payload_bits):
            entry = opened.entries[value >> opened.flag_bits]
            if not entry.active:
                continue
            params = dict(shared)
            if opened.flag_bits:
                params["config"] = scheme.config.replace(payload_flags=opened.payload_flags(value))
            payloads[value] = (
                entry.label,
                create_scheme(scheme.name, key=opened.key(entry.label), **params),
            )
    # the ring detects as the served scheme does (its centring reference too)
    centring = getattr(scheme.config, "centring", None) if can(scheme.name, "statistics") else None
    detector = load_ring_detector(
        ring,
        scheme.name,
        statistic=statistic,
        alpha=alpha,
        generator=generator,
        **({"centring": centring} if centring else {}),
    )
    err.print(
        f"keyring {ring}: marking with {label!r}, detecting against {len(opened)} keys"
        + (f", payloads of {opened.payload_bits} bits" if payloads else "")
    )
    return Keys(label=label, payloads=payloads, ring=detector)
