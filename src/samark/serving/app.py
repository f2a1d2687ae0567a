"""The FastAPI application of ``samark serve``.

Routes: ``POST /v1/chat/completions`` and ``POST /v1/completions`` (OpenAI's shapes, SSE
streaming one sentence per event), ``POST /v1/detect``, ``GET /v1/models``, ``GET /healthz``
and ``GET /metrics`` (Prometheus). Up to ``concurrent_generations`` generations run at
once, each in its own thread; with a batching engine
(:class:`~samark.sampling.batching.BatchingSampler`, which ``samark serve`` builds around
the local model) their candidate draws decode in one batch. Detection runs in one worker
thread. Further requests queue, first come first served. A request that waits or runs past
the time limit gets 504 and its work is dropped (a running generation stops at its next
sentence).
"""

# no ``from __future__ import annotations``: FastAPI reads the routes' annotations at run
# time, and the ``Authorized`` dependency is local to ``create_app``.
import asyncio
import contextlib
import json
import logging
import secrets
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from samark.errors import EmptyTextError, SamarkError
from samark.ring_detection import RingDetector
from samark.sampling.openai_server import ServerError
from samark.schemes.base import Watermark
from samark.serving.metrics import MetricsMiddleware, ServeMetrics
from samark.serving.schema import (
    ChatCompletionRequest,
    CompletionRequest,
    DetectRequest,
    GenerationRequest,
    chat_chunk,
    chat_completion,
    completion_id,
    error_body,
    text_completion,
    usage,
)
from samark.serving.settings import ServeSettings

log = logging.getLogger("samark.serve")
T = TypeVar("T")
ChatRenderer = Callable[[list[dict[str, str]]], str]


class ApiError(Exception):
    """An error answered as OpenAI does: ``{"error": {"message", "type", "code"}}``."""

    def __init__(self, status: int, message: str, kind: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.code = code


@dataclass(frozen=True)
class Upstream:
    """The OpenAI-compatible server behind the sampler, for unwatermarked pass-through
    (``"watermark": false``): an ``openai.AsyncOpenAI`` client and its model name."""

    client: Any
    model: str


@dataclass(frozen=True)
class Caller:
    admin: bool


#: a refused body is read and dropped up to this size before the 413 is sent
DRAIN_BYTES = 16_000_000


class BodyLimitMiddleware:
    """413 for a body over ``limit`` bytes, by its Content-Length or, for a chunked
    upload, as soon as the bytes read pass the limit (the body is buffered up to it and
    replayed to the route, so no route ever reads more)."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            if not declared.isdigit() or int(declared) > self.limit:
                await self._drain(receive)
                await self._refuse(send)
                return
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                if message.get("more_body", False):
                    await self._drain(receive)
                await self._refuse(send)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            message: dict[str, Any] = await receive()
            return message

        await self.app(scope, replay, send)

    async def _drain(self, receive: Any) -> None:
        """Read and drop the rest of a refused body (up to ``DRAIN_BYTES``), so that the
        client, still sending, receives the 413 instead of a broken connection."""
        drained = 0
        while drained <= DRAIN_BYTES:
            message = await receive()
            if message["type"] != "http.request":
                return
            drained += len(message.get("body", b""))
            if not message.get("more_body", False):
                return

    async def _refuse(self, send: Any) -> None:
        body = json.dumps(
            error_body(
                f"request body over {self.limit} bytes", "invalid_request_error", "too_large"
            )
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})


def tokenizer_chat_renderer(tokenizer: Any) -> ChatRenderer:
    """Chat messages as the generator's own prompt text (its chat template), ending where
    the assistant's answer starts."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise SamarkError("the generator's tokenizer has no chat template")

    def render(messages: list[dict[str, str]]) -> str:
        return str(
            tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        )

    return render


@dataclass(frozen=True)
class Keys:
    """What a server marks and detects with, beyond its one scheme: the marking key's
    label in its keyring, one scheme per payload value (a ring of 2**b keys), and the
    ring's detector for ``/v1/detect``. Responses name keys by id and label only."""

    label: str | None = None
    payloads: Mapping[int, tuple[str, Watermark]] = field(default_factory=dict)
    ring: RingDetector | None = None


def create_app(
    scheme: Watermark,
    settings: ServeSettings,
    *,
    render_chat: ChatRenderer | None = None,
    count_tokens: Callable[[str], int] | None = None,
    upstream: Upstream | None = None,
    keys: Keys | None = None,
) -> FastAPI:
    """The application serving ``scheme`` (its key stays inside it).

    ``render_chat`` turns chat messages into the generator's prompt (without it,
    ``/v1/chat/completions`` answers 400); ``count_tokens`` counts usage and applies
    ``max_tokens`` (default: the sampler's tokenizer, else words); ``upstream`` serves
    ``"watermark": false`` requests unchanged; ``keys`` adds a keyring (payloads, and
    detection against every key). Every marked response carries the id of the key that
    marked it in its ``samark`` field, never the key.
    """
    keys = keys or Keys()
    _key_id(scheme)  # a scheme without a key has nothing to serve
    metrics = ServeMetrics()
    generation_pool = ThreadPoolExecutor(
        settings.concurrent_generations, thread_name_prefix="samark-generate"
    )
    detection_pool = ThreadPoolExecutor(1, thread_name_prefix="samark-detect")
    if count_tokens is None:
        count_tokens = _token_counter(scheme) or (lambda text: len(text.split()))
    counter: Callable[[str], int] = count_tokens

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        generation_pool.shutdown(wait=False, cancel_futures=True)
        detection_pool.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(
        title="samark",
        summary="Watermarked text (OpenAI-compatible) and detection",
        lifespan=lifespan,
    )
    app.state.metrics = metrics

    # ---- errors: one JSON shape for every failure ----
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return JSONResponse(
            error_body(exc.message, exc.kind, exc.code), status_code=exc.status, headers=headers
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(
            error_body(_validation_message(exc), "invalid_request_error", "invalid_body"),
            status_code=400,
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return JSONResponse(error_body(str(exc.detail), kind), status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def _crash(_: Request, exc: Exception) -> JSONResponse:
        log.error("internal error: %s", type(exc).__name__)
        return JSONResponse(error_body("internal server error", "server_error"), 500)

    # ---- access ----
    def caller(request: Request) -> Caller:
        header = request.headers.get("authorization", "")
        scheme_, _, token = header.partition(" ")
        token = token.strip() if scheme_.lower() == "bearer" else ""
        admin = bool(token) and _known(token, settings.admin_tokens)
        if admin or not settings.auth:
            return Caller(admin=admin)
        if not token:
            raise ApiError(401, "missing bearer token", "authentication_error", "no_token")
        if not _known(token, settings.tokens):
            raise ApiError(401, "invalid bearer token", "authentication_error", "bad_token")
        return Caller(admin=False)

    Authorized = Annotated[Caller, Depends(caller)]

    def timed_out() -> ApiError:
        message = f"the request took longer than {settings.request_timeout_s:g} s"
        return ApiError(504, message, "timeout_error", "timeout")

    async def run_limited(
        pool: ThreadPoolExecutor, work: Callable[[], T], cancelled: threading.Event
    ) -> T:
        """``work`` in ``pool`` within the request time limit (queueing included)."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(pool, work)
        try:
            return await asyncio.wait_for(future, settings.request_timeout_s)
        except TimeoutError:
            cancelled.set()
            raise timed_out() from None

    # ---- generation ----
    def marking(req: GenerationRequest) -> tuple[Watermark, dict[str, Any]]:
        """The scheme that marks this request's text, and what its response says of the
        key (id, label, payload)."""
        if req.payload is None:
            return scheme, {"key_id": _key_id(scheme), "key_label": keys.label}
        if not keys.payloads:
            raise ApiError(
                400,
                "this server carries no payload (serve a keyring of 2, 4, 8, ... keys)",
                "invalid_request_error",
                "payload",
            )
        if req.payload not in keys.payloads:
            raise ApiError(
                400,
                f"payload must be in 0..{max(keys.payloads)}"
                + ("" if len(keys.payloads) > max(keys.payloads) else " (a retired key's is not)"),
                "invalid_request_error",
                "payload",
            )
        label, chosen = keys.payloads[req.payload]
        return chosen, {"key_id": _key_id(chosen), "key_label": label, "payload": req.payload}

    def generation_work(
        prompt: str,
        req: GenerationRequest,
        budget: int | None,
        emit: Callable[[str], None],
        cancelled: threading.Event,
        marker: Watermark,
    ) -> str:
        """Generate, emitting each sentence within the token budget; the finish reason."""
        if cancelled.is_set():  # timed out while queued
            return "cancelled"
        sentences = min(req.max_sentences or settings.default_sentences, settings.max_sentences)
        used = 0

        def on_sentence(sentence: str, _step: Mapping[str, Any]) -> bool:
            nonlocal used
            if cancelled.is_set():
                return True
            n = counter(sentence)
            if budget is not None and used + n > budget:
                return True
            used += n
            emit(sentence)
            metrics.sentences.inc()
            return False

        # a batching engine's (sentence-level schemes draw candidates through one)
        announce = getattr(getattr(marker, "sampler", None), "caller", None)
        try:
            with announce() if announce is not None else contextlib.nullcontext():
                gen = marker.generate(
                    prompt, max_new_sentences=sentences, seed=req.seed, on_sentence=on_sentence
                )
        except ServerError as exc:
            raise ApiError(502, f"upstream: {exc}", "upstream_error", "upstream") from None
        # "stop": the model ended its answer; else a sentence or token limit ended it
        return "stop" if gen.fallbacks.get("exhausted") else "length"

    async def generate_blocking(
        prompt: str, req: GenerationRequest, budget: int | None, marker: Watermark
    ) -> tuple[list[str], str]:
        pieces: list[str] = []
        cancelled = threading.Event()
        start = time.perf_counter()
        finish = await run_limited(
            generation_pool,
            lambda: generation_work(prompt, req, budget, pieces.append, cancelled, marker),
            cancelled,
        )
        log.info(
            "generated %d sentences in %.1f s (finish %s, key %s)",
            len(pieces),
            time.perf_counter() - start,
            finish,
            _key_id(marker),
        )
        return pieces, finish

    async def generate_stream(
        prompt: str,
        req: GenerationRequest,
        budget: int | None,
        event: Callable[[str, bool], dict[str, Any]],
        final: Callable[[str], dict[str, Any]],
        marker: Watermark,
    ) -> StreamingResponse:
        """SSE: one event per sentence. The first sentence (or the error) is awaited before
        the response starts, so an upstream failure is still a 502, not a broken stream."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        cancelled = threading.Event()
        deadline = loop.time() + settings.request_timeout_s

        def emit(sentence: str) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, ("sentence", sentence))

        def work() -> None:
            try:
                finish = generation_work(prompt, req, budget, emit, cancelled, marker)
                log.info("streamed a completion (finish %s, key %s)", finish, _key_id(marker))
                loop.call_soon_threadsafe(queue.put_nowait, ("done", finish))
            except ApiError as exc:
                loop.call_soon_threadsafe(queue.put_nowait, ("error", exc))
            except Exception as exc:
                log.error("generation failed: %s", type(exc).__name__)
                failure = ApiError(500, "internal server error", "server_error")
                loop.call_soon_threadsafe(queue.put_nowait, ("error", failure))

        async def next_item() -> tuple[str, Any]:
            try:
                return await asyncio.wait_for(queue.get(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                cancelled.set()
                return "error", timed_out()

        generation_pool.submit(work)
        first = await next_item()
        if first[0] == "error":
            raise first[1]

        async def events() -> AsyncIterator[str]:
            item = first
            at_start = True
            try:
                while True:
                    kind, value = item
                    if kind == "sentence":
                        yield _sse(event(value, at_start))
                        at_start = False
                    elif kind == "done":
                        yield _sse(final(value))
                        break
                    else:
                        yield _sse(error_body(value.message, value.kind, value.code))
                        break
                    item = await next_item()
                yield "data: [DONE]\n\n"
            finally:  # the client left or the stream ended: stop generating
                cancelled.set()

        return StreamingResponse(events(), media_type="text/event-stream")

    # ---- routes ----
    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        embedder = getattr(scheme, "embedder", None)  # sentence-level schemes
        return {"status": "ok", "scheme": scheme.name, "embedder": getattr(embedder, "name", None)}

    @app.get("/metrics")
    async def metrics_route() -> Response:
        return Response(metrics.render(), media_type=metrics.content_type)

    @app.get("/v1/models")
    async def models(_: Authorized) -> dict[str, Any]:
        entry = {"id": settings.model_name, "object": "model", "created": 0, "owned_by": "samark"}
        return {"object": "list", "data": [entry]}

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(
        req: ChatCompletionRequest, _: Authorized
    ) -> dict[str, Any] | Response:
        if not req.watermark:
            return await _pass_through(upstream, "messages", req)
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
        marker, mark = marking(req)
        if req.stream:
            return await generate_stream(
                prompt,
                req,
                budget,
                lambda s, first: chat_chunk(
                    cid,
                    model,
                    {"role": "assistant", "content": s.lstrip()} if first else {"content": s},
                ),
                lambda finish: {**chat_chunk(cid, model, {}, finish), "samark": mark},
                marker,
            )
        pieces, finish = await generate_blocking(prompt, req, budget, marker)
        text = "".join(pieces).strip()
        out = chat_completion(cid, model, text, finish, _usage(counter, prompt, pieces))
        return {**out, "samark": mark}

    @app.post("/v1/completions", response_model=None)
    async def completions(req: CompletionRequest, _: Authorized) -> dict[str, Any] | Response:
        if not req.watermark:
            return await _pass_through(upstream, "prompt", req)
        try:
            prompt = req.prompt_text()
        except ValueError as exc:
            raise ApiError(400, str(exc), "invalid_request_error", "prompt") from None
        if not prompt.strip():
            raise ApiError(400, "the prompt is empty", "invalid_request_error", "empty_prompt")
        budget = req.max_tokens
        cid = completion_id("cmpl")
        model = req.model or settings.model_name
        marker, mark = marking(req)
        if req.stream:
            return await generate_stream(
                prompt,
                req,
                budget,
                lambda s, _first: text_completion(cid, model, s, None, None),
                lambda finish: {**text_completion(cid, model, "", finish, None), "samark": mark},
                marker,
            )
        pieces, finish = await generate_blocking(prompt, req, budget, marker)
        use = _usage(counter, prompt, pieces)
        return {**text_completion(cid, model, "".join(pieces), finish, use), "samark": mark}

    @app.post("/v1/detect")
    async def detect(req: DetectRequest, who: Authorized) -> dict[str, Any]:
        if req.details and not who.admin:
            raise ApiError(
                403, "localisation (details) needs an admin token", "permission_error", "admin"
            )
        texts = [req.text] if req.text is not None else list(req.texts or [])
        if len(texts) > settings.max_batch:
            raise ApiError(
                413,
                f"{len(texts)} texts in one request; at most {settings.max_batch}",
                "invalid_request_error",
                "too_many_texts",
            )
        for text in texts:
            if len(text) > settings.max_text_chars:
                raise ApiError(
                    413,
                    f"a text of {len(text)} characters; at most {settings.max_text_chars}",
                    "invalid_request_error",
                    "text_too_long",
                )
        cancelled = threading.Event()

        def work() -> list[dict[str, Any]]:
            out = []
            for text in texts:
                if cancelled.is_set():
                    break
                if keys.ring is not None:
                    out.append(_detect_ring(keys.ring, text, req.details))
                else:
                    out.append(_detect_one(scheme, text, req.details))
            return out

        results = await run_limited(detection_pool, work, cancelled)
        for result in results:
            outcome = (
                "error"
                if "error" in result
                else "watermarked"
                if result["is_watermarked"]
                else "not_watermarked"
            )
            metrics.detections.labels(outcome).inc()
        if req.text is not None:
            if "error" in results[0]:
                raise ApiError(400, results[0]["error"], "invalid_request_error", "empty_text")
            return results[0]
        return {"object": "list", "data": results}

    app.add_middleware(BodyLimitMiddleware, limit=settings.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app


def _key_id(scheme: Watermark) -> str:
    """The public id of the key that ``scheme`` marks with (never the key)."""
    key = getattr(scheme, "key", None)
    if key is None:
        raise SamarkError(f"{scheme.name} marks with no key: nothing to serve")
    return str(key.key_id)


def _token_counter(scheme: Watermark) -> Callable[[str], int] | None:
    """The scheme's generator's token count: its candidate engine's (sentence-level
    schemes) or its language model's (token-level ones)."""
    for holder in ("sampler", "lm"):
        counter = getattr(getattr(scheme, holder, None), "count_tokens", None)
        if counter is not None:
            return counter
    return None


def _detect_one(scheme: Watermark, text: str, details: bool) -> dict[str, Any]:
    try:
        d = scheme.detect(text)
    except EmptyTextError as exc:
        return {"error": str(exc)}
    out: dict[str, Any] = {
        "scheme": d.scheme,
        "p_value": d.p_value,
        "is_watermarked": d.is_watermarked,
        "alpha": d.alpha,
        "statistic": d.statistic,
        "n_units": d.n_units,
        "unit": d.unit,
    }
    if details:
        out["sentences"] = list(d.sentences)
        out["sentence_p_values"] = list(d.sentence_p_values)
        out["marked_sentences"] = list(d.marked_sentences())
    return out


def _detect_ring(ring: RingDetector, text: str, details: bool) -> dict[str, Any]:
    """A keyring's answer: the family-wise p-value, and the key (label, id, its own p) and
    payload when the text is flagged."""
    try:
        r = ring.detect(text)
    except EmptyTextError as exc:
        return {"error": str(exc)}
    out = {k: v for k, v in r.to_dict().items() if k != "payload_bits"}
    if details:
        d = r.detection
        out["sentences"] = list(d.sentences)
        out["sentence_p_values"] = list(d.sentence_p_values)
        out["marked_sentences"] = list(d.marked_sentences())
    return out


def _known(token: str, allowed: frozenset[str]) -> bool:
    """Constant-time membership (no early exit on the first matching token)."""
    found = False
    for candidate in allowed:
        found |= secrets.compare_digest(token.encode(), candidate.encode())
    return found


def _usage(counter: Callable[[str], int], prompt: str, pieces: list[str]) -> dict[str, int]:
    return usage(counter(prompt), sum(counter(p) for p in pieces))


def _sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"


def _validation_message(exc: RequestValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return "invalid request body"
    first = errors[0]
    if first.get("type") == "json_invalid":
        return "the request body is not valid JSON"
    if tuple(first.get("loc", ())) == ("body",) and first.get("type") in (
        "model_attributes_type",
        "dict_type",
    ):
        return "the request body must be a JSON object (Content-Type: application/json)"
    where = ".".join(str(x) for x in first.get("loc", ()) if x != "body")
    message = str(first.get("msg", "invalid"))
    return f"{where}: {message}" if where else message


async def _pass_through(
    upstream: Upstream | None, input_field: str, req: GenerationRequest
) -> dict[str, Any] | Response:
    """An unwatermarked request, sent to the upstream unchanged (but for its model):
    ``input_field`` is "messages" (chat) or "prompt" (completions)."""
    import openai

    if upstream is None:
        raise ApiError(
            400,
            "this server has no upstream for unwatermarked completions",
            "invalid_request_error",
            "no_upstream",
        )
    body = req.model_dump(exclude_none=True, exclude={"watermark", "max_sentences", "model"})
    stream = bool(body.pop("stream", False))
    given = {input_field: body.pop(input_field)}  # the rest goes as it came
    client = upstream.client
    endpoint = client.chat.completions if input_field == "messages" else client.completions
    call: Callable[..., Awaitable[Any]] = endpoint.create
    try:
        result = await call(
            model=upstream.model,
            stream=stream,
            extra_body=body,
            **given,
        )
    except openai.APITimeoutError:
        raise ApiError(504, "upstream timed out", "upstream_error", "upstream_timeout") from None
    except openai.APIConnectionError as exc:
        raise ApiError(502, f"upstream unreachable: {exc}", "upstream_error", "upstream") from None
    except openai.APIStatusError as exc:
        raise ApiError(
            502,
            f"upstream refused the request ({exc.status_code}): {exc.message}",
            "upstream_error",
            "upstream",
        ) from None
    if not stream:
        return dict(result.model_dump(mode="json", exclude_unset=True))

    async def events() -> AsyncIterator[str]:
        try:
            async for chunk in result:
                yield f"data: {chunk.model_dump_json(exclude_unset=True)}\n\n"
        except openai.OpenAIError as exc:
            yield _sse(error_body(f"upstream: {exc}", "upstream_error", "upstream"))
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")
