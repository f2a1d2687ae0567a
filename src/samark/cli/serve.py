"""``samark serve``: the OpenAI-compatible watermarking endpoint and detection API."""

from __future__ import annotations

import logging.config
from pathlib import Path
from typing import Annotated, Any

import typer

from samark.cli.app import app
from samark.cli.common import CellsOption, KeyOption, check_cells, err, fail, load_key
from samark.cli.loading import (
    AnySchemeOption,
    CentringOption,
    DeprecatedEngineOption,
    EngineOption,
    SchemeOption,
    can,
    centring_fields,
    chosen_engine,
    resolve_scheme,
    scheme_engine,
)
from samark.cli.record import RecordOption, check_record_options
from samark.errors import SamarkError
from samark.models import DEFAULT_GENERATOR


@app.command()
def serve(
    key: KeyOption = Path("samark.key"),
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    engine: EngineOption = None,
    generator: Annotated[
        str,
        typer.Option(
            help="Generator preset or folder: the engine's model unless --engine names one; "
            "with a server engine, its tokenizer (chat template, token counts)."
        ),
    ] = DEFAULT_GENERATOR,
    upstream: DeprecatedEngineOption = None,
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
    scheme_name: SchemeOption = None,
    any_scheme: AnySchemeOption = False,
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
    record_url: RecordOption = None,
    store_text: Annotated[
        bool,
        typer.Option(
            "--store-text",
            help="With --record: keep each served sentence's text in the record (default: "
            "keyed hashes and embeddings only).",
        ),
    ] = False,
    cells: CellsOption = None,
) -> None:
    """Serve an OpenAI-compatible watermarking endpoint and a detection API for a keyed scheme.

    --scheme chooses the scheme and --engine where it writes (a server engine also answers
    '"watermark": false' requests); --candidates, --statistic, --centring and --cells are
    SAMark's family's. With --record, every served sentence is recorded before it is sent and an
    admin's detection with details reports each sentence's provenance (docs/provenance.md).
    The server is samark.serving.create_app (docs/serving.md)."""
    scheme_name = resolve_scheme(scheme_name, key, keyring, any_scheme=any_scheme)
    engine = chosen_engine(engine, upstream=upstream)
    scheme_engine(scheme_name, engine)  # an engine the scheme cannot write through: named now
    if centring is not None and not can(scheme_name, "statistics"):
        raise fail("--centring is SAMark's; leave it out for " + scheme_name)
    centring_fields(centring)  # checked before any model loads
    check_cells(cells, scheme_name, can(scheme_name, "statistics"))
    _check_options(candidates, sentences, max_sentences, concurrency, timeout, alpha, statistic)
    check_record_options(record_url, store_text, keyring)
    try:
        import uvicorn

        from samark.serving import ServerConfig, ServeSettings, create_app, load_tokens
    except ImportError as exc:
        raise fail(
            f"`samark serve` needs the server extra ({exc}): pip install 'samark[server]'"
        ) from None
    if label is not None and keyring is None:
        raise fail("--label chooses a key of a --keyring")
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
        config = ServerConfig(
            access=settings,
            key=None if keyring is not None else load_key(key),
            keyring=keyring,
            label=label,
            scheme=scheme_name,
            engine=engine,
            generator=generator,
            candidates=candidates,
            statistic=statistic,
            alpha=alpha,
            centring=centring,
            cells=cells,
            record=record_url,
            store_text=store_text,
        )
        logging.config.dictConfig(log_config())  # the server's start-up lines too
        served = create_app(config)
    except (SamarkError, ValueError, OSError) as exc:  # OSError: a model folder unreadable
        raise fail(str(exc)) from None
    if no_auth:
        err.print("[yellow]warning:[/] serving without API tokens (--no-auth)")
    uvicorn.run(served, host=host, port=port, log_level="info", log_config=log_config())


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
