"""The FastAPI application of ``samark serve``: a :class:`~samark.serving.worker.Worker`
(generation and detection, apart from HTTP) behind three routers
(:mod:`samark.serving.routes`), with bearer-token access, one JSON error shape, a body
size limit and Prometheus metrics.

Routes: ``POST /v1/chat/completions`` and ``POST /v1/completions`` (OpenAI's shapes, SSE
streaming one sentence per event), ``POST /v1/detect``, ``GET /v1/models``, ``GET /healthz``,
``GET /readyz``, ``GET /metrics`` and the detection page at ``GET /`` (:mod:`samark.serving.page`).
"""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from fastapi import FastAPI

from samark.errors import SamarkError
from samark.provenance import ProvenanceRecord
from samark.schemes.base import Watermark
from samark.serving.access import bearer_caller
from samark.serving.body_limit import BodyLimitMiddleware
from samark.serving.errors import install_error_handlers
from samark.serving.metrics import MetricsMiddleware, ServeMetrics
from samark.serving.page import page_router
from samark.serving.routes import (
    ChatRenderer,
    completions_router,
    detection_router,
    operations_router,
)
from samark.serving.settings import ServeSettings
from samark.serving.upstream import Upstream
from samark.serving.worker import Keys, Worker

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def scheme_app(
    scheme: Watermark,
    settings: ServeSettings,
    *,
    render_chat: ChatRenderer | None = None,
    count_tokens: Callable[[str], int] | None = None,
    upstream: Upstream | None = None,
    keys: Keys | None = None,
    on_close: Callable[[], None] | None = None,
    record: ProvenanceRecord | None = None,
    store_text: bool = False,
    warm_engine: bool = True,
) -> FastAPI:
    """The application serving a loaded ``scheme`` (its key stays inside it): what
    :func:`samark.serving.create_app` assembles from a :class:`ServerConfig`.

    ``render_chat`` turns chat messages into the generator's prompt (without it,
    ``/v1/chat/completions`` answers 400); ``count_tokens`` counts usage and applies
    ``max_tokens`` (default: the engine's tokenizer, else words); ``upstream`` serves
    ``"watermark": false`` requests unchanged; ``keys`` adds a keyring (payloads, and
    detection against every key); ``on_close`` runs when the server stops (an engine's
    own processes, vLLM's, stop with it); ``record`` (a provenance record) records
    every served sentence before it is sent (its text too only with ``store_text``) and
    adds each sentence's provenance to admin detections. Every marked response carries the id of
    the key that marked it in its ``samark`` field, never the key. ``warm_engine``: load
    the engine (the generator) at start with the detection models; a server that only
    detects (``samark page``) says False.
    """
    metrics = ServeMetrics()
    worker = Worker(
        scheme,
        settings,
        keys=keys,
        count_tokens=count_tokens,
        metrics=metrics,
        record=record,
        store_text=store_text,
        warm_engine=warm_engine,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # the models load and warm beside the running server: /healthz answers at once,
        # /readyz once they are warm
        warming = asyncio.get_running_loop().run_in_executor(None, worker.warm)
        yield
        warming.cancel()
        worker.close()
        if on_close is not None:
            on_close()

    app = FastAPI(
        title="samark",
        summary="Watermarked text (OpenAI-compatible) and detection",
        lifespan=lifespan,
    )
    app.state.metrics = metrics
    app.state.worker = worker
    install_error_handlers(app)
    caller = bearer_caller(settings)
    routers = [
        operations_router(worker, caller),
        completions_router(worker, caller, render_chat=render_chat, upstream=upstream),
        detection_router(worker, caller),
        page_router(),  # the detection page at /
    ]
    for router in routers:
        app.include_router(router)
    app.add_middleware(BodyLimitMiddleware, limit=settings.max_body_bytes)
    # a request refused before routing (the body limit) still counts under its route
    paths = frozenset(str(getattr(r, "path", "")) for rt in routers for r in rt.routes) - {""}
    app.add_middleware(MetricsMiddleware, metrics=metrics, paths=paths)
    return app


def tokenizer_chat_renderer(tokenizer: "PreTrainedTokenizerBase") -> ChatRenderer:
    """Chat messages as the generator's own prompt text (its chat template), ending where
    the assistant's answer starts."""
    if tokenizer.chat_template is None:
        raise SamarkError("the generator's tokenizer has no chat template")

    def render(messages: list[dict[str, str]]) -> str:
        return str(
            tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        )

    return render
