"""``samark serve``: the OpenAI-compatible watermarking endpoint and detection API."""

from __future__ import annotations

import logging.config
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from samark.cli.app import app
from samark.cli.common import (
    CellsOption,
    KeyOption,
    NullStopOption,
    StatisticOption,
    check_cells,
    err,
    fail,
    load_key,
    refuse_scheme_options,
)
from samark.cli.loading import (
    AnySchemeOption,
    CentringOption,
    DeprecatedEngineOption,
    EngineOption,
    SchemeOption,
    centring_fields,
    chosen_engine,
    resolve_scheme,
    scheme_engine,
)
from samark.cli.manifest_options import (
    C2paCertOption,
    C2paKeyOption,
    C2paTrustOption,
    manifest_signer,
    manifest_verifier,
)
from samark.cli.record import RecordOption, check_record_options
from samark.errors import SamarkError
from samark.models import DEFAULT_GENERATOR

HostOption = Annotated[str, typer.Option(help="Address to listen on.")]

PortOption = Annotated[int, typer.Option(help="Port to listen on.")]

GeneratorOption = Annotated[
    str,
    typer.Option(
        help="Generator preset or folder: the engine's model unless --engine names one; "
        "with a server engine, its tokenizer (chat template, token counts)."
    ),
]

TokensFileOption = Annotated[
    Path | None,
    typer.Option(help="API bearer tokens, one per line (also: SAMARK_API_TOKENS=a,b)."),
]

AdminTokensFileOption = Annotated[
    Path | None,
    typer.Option(
        help="Admin tokens: may ask /v1/detect for localisation (also: SAMARK_ADMIN_TOKENS)."
    ),
]

NoAuthOption = Annotated[
    bool, typer.Option("--no-auth", help="Serve without tokens (loopback demos only).")
]

CandidatesOption = Annotated[
    int | None,
    typer.Option(
        help="Candidates per sentence (N; default: the scheme's own, 32 for the default "
        "scheme). Only a scheme that picks among candidates takes it.",
        show_default=False,
    ),
]

SentencesOption = Annotated[
    int, typer.Option(help="Sentences per completion unless a request sets max_sentences.")
]

MaxSentencesOption = Annotated[int, typer.Option(help="Most sentences a request may ask.")]

ConcurrencyOption = Annotated[
    int,
    typer.Option(
        help="Generations that run at once; the local engine decodes their candidates "
        "in one batch (1: one at a time, first come first served)."
    ),
]


AlphaOption = Annotated[float, typer.Option(help="Significance level of /v1/detect.")]

TimeoutOption = Annotated[
    float,
    typer.Option(
        help="Seconds a request may wait and run. The default fits a default completion "
        "(N = 64, 12 sentences) with the local generator on a busy 2-core CPU "
        "(docs/serving.md)."
    ),
]

MaxBodyBytesOption = Annotated[int, typer.Option(help="Largest request body.")]

KeyringOption = Annotated[
    Path | None,
    typer.Option(
        "--keyring",
        help="Serve a keyring instead of --key: mark with its current key (or --label), "
        "write a request's 'payload' with a ring of 2**b keys, detect against every key.",
    ),
]

LabelOption = Annotated[
    str | None, typer.Option(help="With --keyring: mark with this key, not the current one.")
]

DetectOutputOption = Annotated[
    str,
    typer.Option(
        help="What /v1/detect tells callers without an admin token: 'full' (p-value, "
        "statistic) or 'decision' (only whether it is marked). A public endpoint should "
        "answer 'decision': a p-value lets a forger climb to p < 0.01 in dozens of queries "
        "(docs/operators.md, Forgery)."
    ),
]

DetectBudgetOption = Annotated[
    int | None,
    typer.Option(
        help="Texts a token without admin rights may have detected per hour (default: no "
        "limit). A forger with unlimited queries finds a human text flagged at alpha in "
        "about 1/alpha of them."
    ),
]

StoreTextOption = Annotated[
    bool,
    typer.Option(
        "--store-text",
        help="With --record: keep each served sentence's text in the record (default: "
        "keyed hashes and embeddings only).",
    ),
]


@dataclass(frozen=True)
class ServeRequest:
    """What ``samark serve`` was asked: its options, then :meth:`run`."""

    key: KeyOption
    host: HostOption
    port: PortOption
    engine: EngineOption
    generator: GeneratorOption
    upstream: DeprecatedEngineOption
    tokens_file: TokensFileOption
    admin_tokens_file: AdminTokensFileOption
    no_auth: NoAuthOption
    candidates: CandidatesOption
    sentences: SentencesOption
    max_sentences: MaxSentencesOption
    concurrency: ConcurrencyOption
    statistic: StatisticOption
    alpha: AlphaOption
    timeout: TimeoutOption
    max_body_bytes: MaxBodyBytesOption
    scheme_name: SchemeOption
    any_scheme: AnySchemeOption
    keyring: KeyringOption
    label: LabelOption
    centring: CentringOption
    detect_output: DetectOutputOption
    detect_budget: DetectBudgetOption
    record_url: RecordOption
    store_text: StoreTextOption
    cells: CellsOption
    null_stop: NullStopOption = None
    c2pa_cert: C2paCertOption = None
    c2pa_key: C2paKeyOption = None
    c2pa_trust: C2paTrustOption = None

    def run(self) -> None:
        scheme_name = resolve_scheme(
            self.scheme_name, self.key, self.keyring, any_scheme=self.any_scheme
        )
        engine = chosen_engine(self.engine, upstream=self.upstream)
        scheme_engine(scheme_name, engine)  # an engine the scheme cannot write through: named now
        refuse_scheme_options(
            scheme_name,
            statistic=self.statistic,
            centring=self.centring,
            null_stop=self.null_stop,
            cells=self.cells,
        )
        centring_fields(self.centring)  # checked before any model loads
        check_cells(self.cells, scheme_name)
        _check_options(
            self.candidates,
            self.sentences,
            self.max_sentences,
            self.concurrency,
            self.timeout,
            self.alpha,
        )
        check_record_options(self.record_url, self.store_text, self.keyring)
        try:
            import uvicorn

            from samark.serving import ServerConfig, ServeSettings, create_app, load_tokens
        except ImportError as exc:
            raise fail(
                f"`samark serve` needs the server extra ({exc}): pip install 'samark[server]'"
            ) from None
        if self.label is not None and self.keyring is None:
            raise fail("--label chooses a key of a --keyring")
        signer = manifest_signer(self.c2pa_cert, self.c2pa_key)  # checked before models load
        try:
            settings = ServeSettings(
                tokens=load_tokens(self.tokens_file, "SAMARK_API_TOKENS"),
                admin_tokens=load_tokens(self.admin_tokens_file, "SAMARK_ADMIN_TOKENS"),
                auth=not self.no_auth,
                max_body_bytes=self.max_body_bytes,
                request_timeout_s=self.timeout,
                default_sentences=self.sentences,
                max_sentences=self.max_sentences,
                concurrent_generations=self.concurrency,
                detect_output=self.detect_output,  # type: ignore[arg-type]
                detect_budget=self.detect_budget,
                c2pa_signer=signer,
                c2pa_verifier=manifest_verifier(self.c2pa_trust, signer),
            )
            config = ServerConfig(
                access=settings,
                key=None if self.keyring is not None else load_key(self.key),
                keyring=self.keyring,
                label=self.label,
                scheme=scheme_name,
                engine=engine,
                generator=self.generator,
                candidates=self.candidates,
                statistic=self.statistic,
                alpha=self.alpha,
                centring=self.centring,
                cells=self.cells,
                scheme_params={} if self.null_stop is None else {"null_stop": self.null_stop},
                record=self.record_url,
                store_text=self.store_text,
            )
            logging.config.dictConfig(log_config())  # the server's start-up lines too
            served = create_app(config)
        except (SamarkError, ValueError, OSError) as exc:  # OSError: a model folder unreadable
            raise fail(str(exc)) from None
        if self.no_auth:
            err.print("[yellow]warning:[/] serving without API tokens (--no-auth)")
        uvicorn.run(
            served, host=self.host, port=self.port, log_level="info", log_config=log_config()
        )


@app.command()
def serve(
    key: KeyOption = Path("samark.key"),
    host: HostOption = "127.0.0.1",
    port: PortOption = 8000,
    engine: EngineOption = None,
    generator: GeneratorOption = DEFAULT_GENERATOR,
    upstream: DeprecatedEngineOption = None,
    tokens_file: TokensFileOption = None,
    admin_tokens_file: AdminTokensFileOption = None,
    no_auth: NoAuthOption = False,
    candidates: CandidatesOption = None,
    sentences: SentencesOption = 12,
    max_sentences: MaxSentencesOption = 48,
    concurrency: ConcurrencyOption = 8,
    statistic: StatisticOption = None,
    alpha: AlphaOption = 0.01,
    timeout: TimeoutOption = 1800.0,  # ServeSettings.request_timeout_s's default
    max_body_bytes: MaxBodyBytesOption = 1_000_000,
    scheme_name: SchemeOption = None,
    any_scheme: AnySchemeOption = False,
    keyring: KeyringOption = None,
    label: LabelOption = None,
    centring: CentringOption = None,
    detect_output: DetectOutputOption = "full",
    detect_budget: DetectBudgetOption = None,
    record_url: RecordOption = None,
    store_text: StoreTextOption = False,
    cells: CellsOption = None,
    null_stop: NullStopOption = None,
    c2pa_cert: C2paCertOption = None,
    c2pa_key: C2paKeyOption = None,
    c2pa_trust: C2paTrustOption = None,
) -> None:
    """Serve an OpenAI-compatible watermarking endpoint and a detection API for a keyed scheme.

    --scheme chooses the scheme and --engine where it writes (a server engine also answers
    '"watermark": false' requests); --candidates, --statistic, --centring, --cells and
    --null-stop are the options a scheme declares (`samark schemes list`). With --record,
    every served sentence is recorded before it is sent and an admin's detection with
    details reports each sentence's provenance (docs/provenance.md). With --c2pa-cert and
    --c2pa-key, each marked completion ends with a signed C2PA manifest, and /v1/detect
    reports a text's (docs/compliance.md).
    The server is samark.serving.create_app (docs/serving.md)."""
    ServeRequest(
        key=key,
        host=host,
        port=port,
        engine=engine,
        generator=generator,
        upstream=upstream,
        tokens_file=tokens_file,
        admin_tokens_file=admin_tokens_file,
        no_auth=no_auth,
        candidates=candidates,
        sentences=sentences,
        max_sentences=max_sentences,
        concurrency=concurrency,
        statistic=statistic,
        alpha=alpha,
        timeout=timeout,
        max_body_bytes=max_body_bytes,
        scheme_name=scheme_name,
        any_scheme=any_scheme,
        keyring=keyring,
        label=label,
        centring=centring,
        detect_output=detect_output,
        detect_budget=detect_budget,
        record_url=record_url,
        store_text=store_text,
        cells=cells,
        null_stop=null_stop,
        c2pa_cert=c2pa_cert,
        c2pa_key=c2pa_key,
        c2pa_trust=c2pa_trust,
    ).run()


def log_config() -> dict[str, object]:
    """uvicorn's logging, with the server's own logger (``samark.serve``: one line per
    completion naming its key id, and errors) on uvicorn's stderr handler at INFO;
    without a handler of its own Python prints only its warnings."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)  # uvicorn's dictConfig schema
    config["loggers"]["samark.serve"] = {
        "handlers": ["default"],
        "level": "INFO",
        "propagate": False,
    }
    return config


def _check_options(
    candidates: int | None,
    sentences: int,
    max_sentences: int,
    concurrency: int,
    timeout: float,
    alpha: float,
) -> None:
    """The options' errors, named as typed, before any model loads."""
    for option, value in (
        ("--candidates", 1 if candidates is None else candidates),
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
