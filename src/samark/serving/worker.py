"""The server's work, apart from HTTP: which key marks a request, generation (blocking or
sentence by sentence) in a pool of ``concurrent_generations`` threads, detection in one
thread, each within the request time limit.

A request that waits or runs past the limit gets 504 and its work is dropped (a running
generation stops at its next sentence). With a batching engine
(:class:`~samark.sampling.batching.BatchingEngine`) the running generations' candidate
draws decode in one batch: each generation announces itself to it.
"""

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from samark.detection.pipeline import prepare
from samark.detection.ring_detector import RingDetector
from samark.errors import SamarkError
from samark.provenance import ProvenanceRecord, new_request_id, normalise
from samark.provenance.report import ReportFields
from samark.sampling.batching import BatchingEngine
from samark.sampling.openai_server import OpenAICompletionsEngine, ServerError
from samark.schemes.base import Watermark
from samark.schemes.features import TextFeatures
from samark.segment import split_sentences
from samark.serving import scheduling
from samark.serving.admission import Admitted
from samark.serving.answers import answers
from samark.serving.errors import ApiError, timeout_error
from samark.serving.metrics import ServeMetrics
from samark.serving.scheduling import LARGE, SMALL, PriorityExecutor, split_units
from samark.serving.schema import Body, GenerationRequest, Mark, Readiness, error_body, sse, usage
from samark.serving.settings import ServeSettings

log = logging.getLogger("samark.serve")
T = TypeVar("T")
#: what a streamed generation's worker thread hands the event loop: ("sentence", text),
#: ("done", finish reason) or ("error", the error to answer)
_Item = tuple[str, str] | tuple[str, ApiError]


@dataclass(frozen=True)
class Keys:
    """What a server marks and detects with, beyond its one scheme: the marking key's
    label in its keyring, one scheme per payload value (a ring of 2**b keys), and the
    ring's detector for ``/v1/detect``. Responses name keys by id and label only."""

    label: str | None = None
    payloads: Mapping[int, tuple[str, Watermark]] = field(default_factory=dict)
    ring: RingDetector | None = None


class Worker:
    """Generation and detection for one served scheme (its key stays inside it)."""

    def __init__(
        self,
        scheme: Watermark,
        settings: ServeSettings,
        *,
        keys: Keys | None = None,
        count_tokens: Callable[[str], int] | None = None,
        metrics: ServeMetrics | None = None,
        record: ProvenanceRecord | None = None,
        store_text: bool = False,
        warm_engine: bool = True,
    ) -> None:
        key_id(scheme)  # a scheme without a key has nothing to serve
        self.scheme = scheme
        self.settings = settings
        self.keys = keys or Keys()
        #: what ``/v1/detect`` detects with: the keyring, or the served key as a ring of one
        self.detector = self.keys.ring or RingDetector.of_scheme(scheme)
        #: the provenance record: every served sentence is recorded in it before it is
        #: sent (its text too only with ``store_text``), and a detection with ``details``
        #: reads it (which sentences were served); None: no record
        self.record = record
        self.store_text = store_text
        self.metrics = metrics or ServeMetrics()
        self.count_tokens = count_tokens or scheme.token_counter or (lambda t: len(t.split()))
        self._generation_pool = ThreadPoolExecutor(
            settings.concurrent_generations, thread_name_prefix="samark-generate"
        )
        #: the one detection thread: a request that fits in one unit goes first
        self._detection_pool = PriorityExecutor("samark-detect")
        #: whether :meth:`warm` loads the engine too (a detection-only server: no)
        self.warm_engine = warm_engine
        #: set once :meth:`warm` has loaded the models (``/readyz``)
        self.warmed = threading.Event()
        #: why warming failed, if it did (the server then never reports ready)
        self.warm_error: str | None = None

    def warm(self) -> None:
        """Load what a first request would otherwise load: the engine (the generator, for
        a scheme that writes with one; unless ``warm_engine`` is off) and, with one
        detection of a short text, the embedder, the tokenizer and the null draws. Sets
        :attr:`warmed`; a failure is logged and kept in :attr:`warm_error` (readiness says
        so), never raised."""
        try:
            if self.warm_engine:
                _ = self.scheme.engine
            answers(self.detector, prepare(self.detector, [_WARM_TEXT]), False)
        except Exception as exc:
            self.warm_error = f"{type(exc).__name__}: {exc}"
            log.error("warming the models failed: %s", self.warm_error)
            return
        self.warmed.set()

    def readiness(self) -> Readiness:
        """Whether the server can answer now: the models loaded and warm, the record (if
        any) reachable, and a remote engine (an OpenAI-compatible server) answering.
        ``ready`` is their conjunction; ``checks`` each one."""
        checks: dict[str, bool] = {"models": self.warmed.is_set()}
        if self.record is not None:
            checks["record"] = self.record.reachable()
        server = self._remote_engine()
        if server is not None:
            checks["engine"] = server.reachable()
        out: Readiness = {"ready": all(checks.values()), "checks": checks}
        if self.warm_error is not None:
            out["error"] = "the models failed to load; see the server's log"
        return out

    def _remote_engine(self) -> OpenAICompletionsEngine | None:
        """The OpenAI-compatible server the scheme draws its candidates from, if it does
        (a local engine is up once the models are warm), and only once it is loaded."""
        if not self.warmed.is_set() or not self.warm_engine:
            return None
        engine = self.scheme.engine
        if isinstance(engine, BatchingEngine):
            engine = engine.engine
        return engine if isinstance(engine, OpenAICompletionsEngine) else None

    def close(self) -> None:
        """Drop queued work (running work ends at its next check)."""
        self._generation_pool.shutdown(wait=False, cancel_futures=True)
        self._detection_pool.shutdown(wait=False, cancel_futures=True)

    # ---- marking ----
    def marking(self, req: GenerationRequest) -> tuple[Watermark, Mark]:
        """The scheme that marks this request's text, and what its response says of the
        key (id, label, payload)."""
        keys = self.keys
        if req.payload is None:
            return self.scheme, {"key_id": key_id(self.scheme), "key_label": keys.label}
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
        return chosen, {"key_id": key_id(chosen), "key_label": label, "payload": req.payload}

    def usage(self, prompt: str, pieces: list[str]) -> dict[str, int]:
        return usage(self.count_tokens(prompt), sum(self.count_tokens(p) for p in pieces))

    # ---- generation ----
    async def generate(
        self,
        prompt: str,
        req: GenerationRequest,
        budget: int | None,
        marker: Watermark,
        request_id: str | None = None,
    ) -> tuple[list[str], str]:
        """The sentences of one completion within the token ``budget``, and its finish
        reason (recorded under ``request_id`` where the server keeps a record)."""
        pieces: list[str] = []
        cancelled = threading.Event()
        start = time.perf_counter()
        finish = await self._limited(
            self._generation_pool,
            lambda: self._generate(
                prompt, req, budget, pieces.append, cancelled, marker, request_id
            ),
            cancelled,
        )
        log.info(
            "generated %d sentences in %.1f s (finish %s, key %s)",
            len(pieces),
            time.perf_counter() - start,
            finish,
            key_id(marker),
        )
        return pieces, finish

    async def stream(
        self,
        prompt: str,
        req: GenerationRequest,
        budget: int | None,
        event: Callable[[str, bool], Body],
        final: Callable[[str], Body],
        marker: Watermark,
        request_id: str | None = None,
    ) -> AsyncIterator[str]:
        """Server-sent events, one per sentence (``event(sentence, first)``), then
        ``final(finish)`` and ``[DONE]``. The first sentence (or the error) is awaited
        before this returns, so that an upstream failure is still an HTTP error, not a
        broken stream."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[_Item] = asyncio.Queue()
        cancelled = threading.Event()
        deadline = loop.time() + self.settings.request_timeout_s

        def emit(sentence: str) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, ("sentence", sentence))

        def work() -> None:
            try:
                finish = self._generate(prompt, req, budget, emit, cancelled, marker, request_id)
                log.info("streamed a completion (finish %s, key %s)", finish, key_id(marker))
                loop.call_soon_threadsafe(queue.put_nowait, ("done", finish))
            except ApiError as exc:
                loop.call_soon_threadsafe(queue.put_nowait, ("error", exc))
            except Exception as exc:
                log.error("generation failed: %s", type(exc).__name__)
                failure = ApiError(500, "internal server error", "server_error")
                loop.call_soon_threadsafe(queue.put_nowait, ("error", failure))

        async def next_item() -> _Item:
            try:
                return await asyncio.wait_for(queue.get(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                cancelled.set()
                return "error", timeout_error(self.settings.request_timeout_s)

        self._generation_pool.submit(work)
        first = await next_item()
        if isinstance(first[1], ApiError):  # an "error" item
            raise first[1]

        async def events() -> AsyncIterator[str]:
            item: _Item = first
            at_start = True
            try:
                while True:
                    kind, value = item
                    if isinstance(value, ApiError):  # an "error" item
                        yield sse(error_body(value.message, value.kind, value.code))
                        break
                    if kind == "sentence":
                        yield sse(event(value, at_start))
                        at_start = False
                    else:  # "done"
                        yield sse(final(value))
                        break
                    item = await next_item()
                yield "data: [DONE]\n\n"
            finally:  # the client left or the stream ended: stop generating
                cancelled.set()

        return events()

    def _generate(
        self,
        prompt: str,
        req: GenerationRequest,
        budget: int | None,
        emit: Callable[[str], None],
        cancelled: threading.Event,
        marker: Watermark,
        request_id: str | None = None,
    ) -> str:
        """Generate, emitting each sentence within the token budget (recorded first,
        where the server keeps a record); the finish reason."""
        if cancelled.is_set():  # timed out while queued
            return "cancelled"
        settings = self.settings
        sentences = min(req.max_sentences or settings.default_sentences, settings.max_sentences)
        used = 0
        served = self._recorder(request_id)

        def on_sentence(sentence: str, _step: Mapping[str, object]) -> bool:
            nonlocal used
            if cancelled.is_set():
                return True
            n = self.count_tokens(sentence)
            if budget is not None and used + n > budget:
                return True
            used += n
            if served is not None:
                served.sentence(sentence)
            emit(sentence)
            self.metrics.sentences.inc()
            return False

        # a batching engine batches the draws of the generations it knows are running
        engine = marker.engine
        announce = engine.caller() if isinstance(engine, BatchingEngine) else None
        try:
            with announce if announce is not None else contextlib.nullcontext():
                gen = marker.generate(
                    prompt, max_new_sentences=sentences, seed=req.seed, on_sentence=on_sentence
                )
        except ServerError as exc:
            raise ApiError(502, f"upstream: {exc}", "upstream_error", "upstream") from None
        if served is not None:
            served.finish()
        # "stop": the model ended its answer; else a sentence or token limit ended it
        return "stop" if gen.fallbacks.get("exhausted") else "length"

    def _recorder(self, request_id: str | None) -> "_Served | None":
        if self.record is None:
            return None
        return _Served(self.record, request_id or new_request_id(), self.store_text)

    # ---- detection ----
    async def detect(self, admitted: Admitted, details: bool) -> list[Body]:
        """Each admitted text's detection (against the ring, if the server has one), or
        its error; counted in the metrics. With ``details`` and a record, each sentence's
        provenance too (``provenance``: served verbatim, a close paraphrase of a served
        one, or not served). The texts come split once (:func:`admit_request`); each is
        embedded once, and scored on those features (:mod:`samark.detection.pipeline`).

        Fair under load: the work is cut into units of about ``UNIT_SENTENCES`` sentences
        (a group of short texts embedded and scored; a longer text embedded a chunk at a
        time, then scored) and each unit queues on the one detection thread as its own
        task, the next only when the last is done. A request that is one unit queues ahead
        of larger ones (``serving.scheduling``), which take turns unit by unit: a small
        check waits for the unit that is running, never for a batch."""
        cancelled = threading.Event()
        deadline = time.monotonic() + self.settings.request_timeout_s
        embedder = self.detector.embedder
        out: list[Body] = []
        states = admitted.manifest_states()
        groups = split_units(admitted.sentences)
        # a request that is one unit goes before the units of larger ones
        one_unit = len(groups) == 1 and len(groups[0][1]) <= scheduling.UNIT_SENTENCES
        priority = SMALL if one_unit else LARGE
        for group, split in groups:
            # a unit embeds and scores its texts, embedding them there where they fit in
            # one unit; a longer text's sentences are embedded a unit at a time first
            known: dict[str, np.ndarray] = {}
            unit = scheduling.UNIT_SENTENCES
            if embedder is not None and len(split) > unit:
                for start in range(0, len(split), unit):
                    chunk = split[start : start + unit]
                    vectors = await self._limited(
                        self._detection_pool,
                        functools.partial(embedder.encode, chunk),
                        cancelled,
                        deadline,
                        priority,
                    )
                    known.update(zip(chunk, vectors, strict=True))
            texts = [admitted.texts[i] for i in group]
            sentences = [admitted.sentences[i] for i in group]
            out.extend(
                await self._limited(
                    self._detection_pool,
                    functools.partial(self._score, texts, sentences, details, known, states),
                    cancelled,
                    deadline,
                    priority,
                )
            )
        for result in out:
            outcome = (
                "error"
                if "error" in result
                else "watermarked"
                if result["is_watermarked"]
                else "not_watermarked"
            )
            self.metrics.detections.labels(outcome).inc()
        for result, manifest in zip(out, admitted.manifests, strict=True):
            if manifest is not None and "error" not in result:
                result["manifest"] = manifest
        return out

    def _score(
        self,
        texts: list[str],
        sentences: list[tuple[str, ...]],
        details: bool,
        known: dict[str, np.ndarray],
        manifests: dict[str, str] | None = None,
    ) -> list[Body]:
        """One unit's texts prepared (their sentences given, the embeddings in ``known``
        reused: nothing is split or embedded twice) and scored together."""
        prepared = prepare(self.detector, texts, sentences=sentences, known=known)
        check = self._provenance if details and self.record is not None else None
        return answers(self.detector, prepared, details, check, manifests)

    def _provenance(self, text: TextFeatures) -> ReportFields:
        """The record's report on ``text``'s sentences, or 503 where the record cannot
        be read (as a generation answers where it cannot be written)."""
        assert self.record is not None
        try:
            return self.record.check_sentences(text.sentences).to_dict()
        except SamarkError as exc:
            log.error("the provenance record could not be read: %s", exc)
            raise ApiError(
                503,
                "the provenance record cannot be read; ask again without details, or later",
                "server_error",
                "record_unavailable",
            ) from None

    async def _limited(
        self,
        pool: ThreadPoolExecutor | PriorityExecutor,
        work: Callable[[], T],
        cancelled: threading.Event,
        deadline: float | None = None,
        priority: int | None = None,
    ) -> T:
        """``work`` in ``pool`` within the request time limit (queueing included): the
        settings' timeout from now, or what is left until ``deadline`` (``time.monotonic``);
        at ``priority`` in a :class:`PriorityExecutor`."""
        timeout = self.settings.request_timeout_s
        left = timeout if deadline is None else deadline - time.monotonic()
        if left <= 0:
            cancelled.set()
            raise timeout_error(timeout)
        if isinstance(pool, PriorityExecutor):
            future = asyncio.wrap_future(
                pool.submit_at(LARGE if priority is None else priority, work)
            )
        else:
            future = asyncio.get_running_loop().run_in_executor(pool, work)
        try:
            return await asyncio.wait_for(future, left)
        except TimeoutError:
            cancelled.set()
            raise timeout_error(timeout) from None


#: what :meth:`Worker.warm` detects: two short sentences
_WARM_TEXT = "The server is starting. This text warms its models."


class _Served:
    """One response's recording. Each sentence is recorded before it is sent (one
    transaction: durable once that returns); when the response ends, so are the
    sentences its joined text splits into that were not recorded as such (two sentences
    joined without a space read as one), so that a detection of the text as served finds
    every sentence. A record that cannot be written stops the response (503): nothing
    is served unrecorded."""

    def __init__(self, record: ProvenanceRecord, request_id: str, store_text: bool) -> None:
        self.record = record
        self.request_id = request_id
        self.store_text = store_text
        self.pieces: list[str] = []
        self.recorded: set[str] = set()

    def sentence(self, sentence: str) -> None:
        self._write(split_sentences(sentence))
        self.pieces.append(sentence)

    def finish(self) -> None:
        joined = split_sentences("".join(self.pieces))
        self._write([s for s in joined if normalise(s) not in self.recorded])

    def _write(self, sentences: list[str]) -> None:
        if not sentences:
            return
        try:
            self.record.record(sentences, request_id=self.request_id, store_text=self.store_text)
        except SamarkError as exc:
            log.error("the provenance record refused a served sentence: %s", exc)
            raise ApiError(
                503,
                "the provenance record cannot be written; nothing is served unrecorded",
                "server_error",
                "record_unavailable",
            ) from None
        self.recorded.update(normalise(s) for s in sentences)


def key_id(scheme: Watermark) -> str:
    """The public id of the key that ``scheme`` marks with (never the key)."""
    if scheme.key_id is None:
        raise SamarkError(f"{scheme.name} marks with no key: nothing to serve")
    return scheme.key_id
