"""One candidate engine shared by concurrent generations, their draws batched together.

A server runs several generations at once (one thread each). Each of their sentence steps
asks the engine for N candidates; alone, those draws would queue and run one after another.
:class:`BatchingSampler` collects the draws that wait while the engine is busy and runs
them as one batch through the engine's ``sample_many`` (the model runs once per token for
every caller's rows). Batches form at draw boundaries, not inside a draw's decoding: a
request that arrives mid-batch joins the next one.

Callers that announce themselves (:meth:`BatchingSampler.caller`) let the engine wait,
briefly (``linger_s``), until every running generation has its draw queued, so that
generations that run in step batch together rather than one straggler at a time. Without
callers, or with one, nothing waits.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from typing import Any, Protocol

from samark.sampling.base import (
    CandidateBatch,
    LogitsBias,
    RowPruner,
    SampleRequest,
    SamplingParams,
)


class BatchEngine(Protocol):
    """An engine that draws several requests in one batch."""

    name: str

    def sample_many(self, requests: Sequence[SampleRequest]) -> list[CandidateBatch]: ...


class BatchingSampler:
    """A thread-safe candidate sampler over ``engine`` that batches concurrent draws.

    ``max_rows`` bounds the candidate rows of one batch (memory); a draw larger than it
    runs alone. ``linger_s`` is the longest the engine waits for announced callers to
    queue their draws. Other attributes (tokenizer, ``count_tokens``, what the engine
    supports) are the engine's.
    """

    def __init__(self, engine: BatchEngine, *, max_rows: int = 1024, linger_s: float = 0.5):
        if not callable(getattr(engine, "sample_many", None)):
            raise TypeError(f"{engine!r} cannot draw several requests in one batch")
        if max_rows < 1 or linger_s < 0:
            raise ValueError("need max_rows >= 1 and linger_s >= 0")
        self.engine = engine
        self.max_rows = max_rows
        self.linger_s = linger_s
        self._queue: list[tuple[SampleRequest, Future[CandidateBatch]]] = []
        self._cond = threading.Condition()
        self._callers = 0
        self._worker: threading.Thread | None = None
        self._closed = False
        #: batches run, and the draws they held (``draws / batches``: the mean batch)
        self.batches = 0
        self.draws = 0
        self.largest = 0

    @property
    def name(self) -> str:
        return self.engine.name

    def __getattr__(self, name: str) -> Any:
        if name == "engine":  # not set yet (a half-built object): no recursion
            raise AttributeError(name)
        return getattr(self.engine, name)

    def __repr__(self) -> str:
        return f"BatchingSampler({self.engine!r}, max_rows={self.max_rows})"

    @contextlib.contextmanager
    def caller(self) -> Iterator[None]:
        """Announce a running generation for the block (a server wraps each request)."""
        with self._cond:
            self._callers += 1
        try:
            yield
        finally:
            with self._cond:
                self._callers -= 1
                self._cond.notify_all()

    def sample(
        self,
        prefix: str,
        n: int,
        params: SamplingParams,
        *,
        seed: int | None = None,
        token_layer: LogitsBias | None = None,
        prune: RowPruner | None = None,
    ) -> CandidateBatch:
        """As the engine's ``sample``, run in the engine's next batch."""
        return self.submit(SampleRequest(prefix, n, params, seed, token_layer, prune)).result()

    def sample_many(self, requests: Sequence[SampleRequest]) -> list[CandidateBatch]:
        futures = [self.submit(r) for r in requests]
        return [f.result() for f in futures]

    def submit(self, request: SampleRequest) -> Future[CandidateBatch]:
        """Queue one draw; its future holds the candidates (or the engine's error)."""
        future: Future[CandidateBatch] = Future()
        with self._cond:
            if self._closed:
                raise RuntimeError("the sampler is closed")
            self._queue.append((request, future))
            if self._worker is None:
                self._worker = threading.Thread(
                    target=self._run, name="samark-batch-engine", daemon=True
                )
                self._worker.start()
            self._cond.notify_all()
        return future

    def close(self) -> None:
        """Finish the queued draws, then stop the engine's thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            worker = self._worker
        if worker is not None:
            worker.join()

    def _next_batch(self) -> list[tuple[SampleRequest, Future[CandidateBatch]]]:
        """Wait for draws; the next batch (empty once closed and drained)."""
        with self._cond:
            while not self._queue and not self._closed:
                self._cond.wait()
            deadline = time.monotonic() + self.linger_s
            while (
                not self._closed
                and len(self._queue) < self._callers
                and (left := deadline - time.monotonic()) > 0
            ):
                self._cond.wait(left)
            batch: list[tuple[SampleRequest, Future[CandidateBatch]]] = []
            rows = 0
            while self._queue and (not batch or rows + self._queue[0][0].n <= self.max_rows):
                item = self._queue.pop(0)
                batch.append(item)
                rows += item[0].n
            return batch

    def _run(self) -> None:
        while batch := self._next_batch():
            self.batches += 1
            self.draws += len(batch)
            self.largest = max(self.largest, len(batch))
            try:
                results = self.engine.sample_many([r for r, _ in batch])
            except Exception as exc:
                if len(batch) == 1:
                    batch[0][1].set_exception(exc)
                    continue
                for request, future in batch:  # one bad draw must not fail the others
                    try:
                        future.set_result(self.engine.sample_many([request])[0])
                    except Exception as alone:
                        future.set_exception(alone)
                continue
            for (_, future), result in zip(batch, results, strict=True):
                future.set_result(result)
