"""The served routes, as routers over a :class:`~samark.serving.worker.Worker`:
completions (OpenAI's chat and text shapes, SSE streaming one sentence per event),
detection, and operations (health, metrics, models)."""

# no ``from __future__ import annotations``: FastAPI reads the routes' annotations at run
# time, and the ``Authorized`` dependency is local to each router.
import asyncio
from collections.abc import Callable
from typing import Annotated, ParamSpec

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from samark.intake import TextRefused
from samark.serving.access import Caller, DetectBudget
from samark.serving.admission import admit_request
from samark.serving.errors import ApiError
from samark.serving.manifests import StreamSeal, seal
from samark.serving.schema import (
    Body,
    ChatCompletionRequest,
    CompletionRequest,
    DetectRequest,
    GenerationRequest,
    chat_chunk,
    chat_completion,
    completion_id,
    text_completion,
)
from samark.serving.settings import DECISION_FIELDS
from samark.serving.upstream import Upstream, pass_through
from samark.serving.worker import Worker

P = ParamSpec("P")
ChatRenderer = Callable[[list[dict[str, str]]], str]
CallerDependency = Callable[[Request], Caller]


def completions_router(
    worker: Worker,
    caller: CallerDependency,
    *,
    render_chat: ChatRenderer | None = None,
    upstream: Upstream | None = None,
) -> APIRouter:
    """``POST /v1/chat/completions`` and ``POST /v1/completions``: marked text, or with
    ``"watermark": false`` the upstream's unmarked answer."""
    router = APIRouter()
    Authorized = Annotated[Caller, Depends(caller)]
    settings = worker.settings

    @router.post("/v1/chat/completions", response_model=None)
    async def chat_completions(req: ChatCompletionRequest, _: Authorized) -> Body | Response:
        if not req.watermark:
            return await pass_through(upstream, "messages", req)
        if render_chat is None:
            raise ApiError(
                400,
                "this server has no chat template; use /v1/completions",
                "invalid_request_error",
                "no_chat_template",
            )
        try:
            messages = [{"role": m.role, "content": m.text()} for m in req.messages]
        except ValueError as exc:
            raise ApiError(400, str(exc), "invalid_request_error", "content") from None
        prompt = render_chat(messages)
        budget = req.token_budget()
        cid = completion_id("chatcmpl")
        model = req.model or settings.model_name
        return await _complete(
            worker,
            req,
            prompt,
            budget,
            lambda s, first: chat_chunk(
                cid,
                model,
                {"role": "assistant", "content": s.lstrip()} if first else {"content": s},
            ),
            lambda finish: chat_chunk(cid, model, {}, finish),
            lambda pieces, finish, use: chat_completion(
                cid, model, "".join(pieces).strip(), finish, use
            ),
            cid,
        )

    @router.post("/v1/completions", response_model=None)
    async def completions(req: CompletionRequest, _: Authorized) -> Body | Response:
        if not req.watermark:
            return await pass_through(upstream, "prompt", req)
        try:
            prompt = req.prompt_text()
        except ValueError as exc:
            raise ApiError(400, str(exc), "invalid_request_error", "prompt") from None
        if not prompt.strip():
            raise ApiError(400, "the prompt is empty", "invalid_request_error", "empty_prompt")
        budget = req.max_tokens
        cid = completion_id("cmpl")
        model = req.model or settings.model_name
        return await _complete(
            worker,
            req,
            prompt,
            budget,
            lambda s, _first: text_completion(cid, model, s, None, None),
            lambda finish: text_completion(cid, model, "", finish, None),
            lambda pieces, finish, use: text_completion(cid, model, "".join(pieces), finish, use),
            cid,
        )

    return router


async def _complete(
    worker: Worker,
    req: GenerationRequest,
    prompt: str,
    budget: int | None,
    event: Callable[[str, bool], Body],
    final: Callable[[str], Body],
    whole: Callable[[list[str], str, dict[str, int]], Body],
    request_id: str,
) -> Body | Response:
    """Marked text in a route's shape: streamed, one ``event(sentence, first)`` per
    sentence then ``final(finish)``; else ``whole(sentences, finish, usage)``. Either
    answer names the key that marked it (``samark``); a server with a record records
    each sentence under ``request_id`` (the completion's ``id``) before sending it."""
    marker, mark = worker.marking(req)
    signer = worker.settings.c2pa_signer
    model = getattr(req, "model", None) or worker.settings.model_name
    if req.stream:
        if signer is not None:  # the manifest over every chunk's text, in the last chunk
            sealing = StreamSeal(signer, model, mark)
            event = _then(event, sealing.chunk)
            final = _then(final, sealing.last)
        events = await worker.stream(
            prompt,
            req,
            budget,
            event,
            lambda finish: {**final(finish), "samark": mark},
            marker,
            request_id,
        )
        return StreamingResponse(events, media_type="text/event-stream")
    pieces, finish = await worker.generate(prompt, req, budget, marker, request_id)
    body = whole(pieces, finish, worker.usage(prompt, pieces))
    if signer is not None:
        body = await asyncio.to_thread(seal, body, signer, model, mark)
    return {**body, "samark": mark}


def _then(make: Callable[P, Body], after: Callable[[Body], Body]) -> Callable[P, Body]:
    """``make``, then ``after`` on what it made (a chunk sealed on its way out)."""

    def both(*args: P.args, **kwargs: P.kwargs) -> Body:
        return after(make(*args, **kwargs))

    return both


def detection_router(worker: Worker, caller: CallerDependency) -> APIRouter:
    """``POST /v1/detect``: one text or a batch, against the served key or the ring;
    localisation (``details``) for admin tokens only."""
    router = APIRouter()
    Authorized = Annotated[Caller, Depends(caller)]
    settings = worker.settings
    budget = None if settings.detect_budget is None else DetectBudget(settings.detect_budget)

    @router.post("/v1/detect")
    async def detect(req: DetectRequest, who: Authorized) -> Body:
        if req.details and not who.admin:
            raise ApiError(
                403, "localisation (details) needs an admin token", "permission_error", "admin"
            )
        texts = [req.text] if req.text is not None else list(req.texts or [])
        if not texts:
            raise ApiError(
                400,
                "'texts' is empty: give at least one text",
                "invalid_request_error",
                "empty_batch",
            )
        if len(texts) > settings.max_batch:
            raise ApiError(
                413,
                f"{len(texts)} texts in one request; at most {settings.max_batch}",
                "invalid_request_error",
                "too_many_texts",
            )
        try:  # the one intake (samark.detection.pipeline): the CLI's limits and words;
            # splitting a megabyte takes a moment: off the event loop
            admitted = await asyncio.to_thread(admit_request, texts, settings)
        except TextRefused as exc:
            status = 413 if exc.code == "text_too_long" else 400
            raise ApiError(status, str(exc), "invalid_request_error", exc.code) from None
        sentences = admitted.sentence_count
        if sentences > settings.max_detect_sentences:
            raise ApiError(
                413,
                f"{sentences} sentences in one request; at most {settings.max_detect_sentences}"
                " (send fewer texts at a time)",
                "invalid_request_error",
                "too_many_sentences",
            )
        if budget is not None and not who.admin:
            budget.charge(who, sentences)
        results = await worker.detect(admitted, req.details)
        if settings.detect_output == "decision" and not who.admin:
            results = [
                r if "error" in r else {k: v for k, v in r.items() if k in DECISION_FIELDS}
                for r in results
            ]
        if req.text is not None:
            if "error" in results[0]:
                raise ApiError(400, str(results[0]["error"]), "invalid_request_error", "empty_text")
            return results[0]
        return {"object": "list", "data": results}

    return router


def operations_router(worker: Worker, caller: CallerDependency) -> APIRouter:
    """``GET /healthz`` (alive), ``GET /readyz`` (ready to answer: models warm, record
    reachable) and ``GET /metrics`` (open), ``GET /v1/models`` (authorized)."""
    router = APIRouter()
    Authorized = Annotated[Caller, Depends(caller)]
    scheme = worker.scheme
    metrics = worker.metrics

    settings = worker.settings
    limits = {
        "max_body_bytes": settings.max_body_bytes,
        "max_batch": settings.max_batch,
        "max_text_chars": settings.max_text_chars,
        "max_text_sentences": settings.max_text_sentences,
        "max_detect_sentences": settings.max_detect_sentences,
    }

    @router.get("/healthz")
    async def healthz() -> Body:
        embedder = scheme.embedder  # sentence-level schemes
        return {
            "status": "ok",
            "scheme": scheme.name,
            "embedder": None if embedder is None else embedder.name,
            # what one /v1/detect request may hold (the page checks a file against them)
            "limits": limits,
        }

    @router.get("/readyz", response_model=None)
    async def readyz() -> Body | JSONResponse:
        # the record probe may wait on a database: off the event loop
        state = await asyncio.get_running_loop().run_in_executor(None, worker.readiness)
        body = {"status": "ready" if state["ready"] else "not_ready", **state}
        return body if state["ready"] else JSONResponse(body, status_code=503)

    @router.get("/metrics")
    async def metrics_route() -> Response:
        return Response(metrics.render(), media_type=metrics.content_type)

    @router.get("/v1/models")
    async def models(_: Authorized) -> Body:
        name = worker.settings.model_name
        entry = {"id": name, "object": "model", "created": 0, "owned_by": "samark"}
        return {"object": "list", "data": [entry]}

    return router
