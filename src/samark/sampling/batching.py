"""One candidate engine shared by concurrent generations, their draws batched together.

A server runs several generations at once (one thread each). Each of their sentence steps
asks the engine for N candidates; alone, those draws would queue and run one after another.
:class:`BatchingEngine` collects the draws that wait while the engine is busy and runs
them as one batch through the engine's ``sample_many`` (the model runs once per token for
every caller's rows). Batches form at draw boundaries, not inside a draw's decoding: a
request that arrives mid-batch joins the next one.

Callers that announce themselves (:meth:`BatchingEngine.caller`) let the engine wait,
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
from typing import TYPE_CHECKING

from samark.sampling.base import (
    BatchEngine,
    CandidateBatch,
    EngineAbilities,
    SampleRequest,
)

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

#: a queued draw: the request, its caller's future, the caller's thread id
_Queued = tuple[SampleRequest, "Future[CandidateBatch]", int]


class BatchingEngine(BatchEngine):
    """A thread-safe engine over ``engine`` that batches concurrent draws.

    ``max_rows`` bounds the candidate rows of one batch (memory: the engine keeps every
    row's keys and values for the longest sentence; 512 rows are 8 concurrent draws of
    N = 64); a draw larger than it runs alone. ``linger_s`` is the longest the engine
    waits for announced callers to queue their draws. Its ``abilities``, ``tokenizer`` and
    ``count_tokens`` are the engine's; anything else of the engine is ``self.engine``'s
    (no pass-through).
    """

    def __init__(self, engine: BatchEngine, *, max_rows: int = 512, linger_s: float = 0.5):
        if max_rows < 1 or linger_s < 0:
            raise ValueError("need max_rows >= 1 and linger_s >= 0")
        self.engine = engine
        self.name = engine.name
        self.max_rows = max_rows
        self.linger_s = linger_s
        self._queue: list[_Queued] = []
        self._cond = threading.Condition()
        self._callers = 0
        self._worker: threading.Thread | None = None
        self._closed = False
        #: batches run, and the draws they held (``draws / batches``: the mean batch)
        self.batches = 0
        self.draws = 0
        self.largest = 0

    @property
    def abilities(self) -> EngineAbilities:  # type: ignore[override]
        """The engine's: this queue only batches its draws."""
        return self.engine.abilities

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase | None:  # type: ignore[override]
        """The engine's."""
        return self.engine.tokenizer

    def count_tokens(self, text: str) -> int:
        """The engine's."""
        return self.engine.count_tokens(text)

    def __repr__(self) -> str:
        return f"BatchingEngine({self.engine!r}, max_rows={self.max_rows})"

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

    def sample_many(self, requests: Sequence[SampleRequest]) -> list[CandidateBatch]:
        """As the engine's, run in the engine's next batch (``sample``: one draw)."""
        return [f.result() for f in self._submit(requests)]

    def submit(self, request: SampleRequest) -> Future[CandidateBatch]:
        """Queue one draw; its future holds the candidates (or the engine's error)."""
        return self._submit([request])[0]

    def _submit(self, requests: Sequence[SampleRequest]) -> list[Future[CandidateBatch]]:
        """Queue a caller's draws together (the engine sees them in one wake-up)."""
        futures: list[Future[CandidateBatch]] = [Future() for _ in requests]
        caller = threading.get_ident()
        with self._cond:
            if self._closed:
                raise RuntimeError("the engine is closed")
            self._queue.extend(zip(requests, futures, [caller] * len(requests), strict=True))
            if self._worker is None:
                self._worker = threading.Thread(
                    target=self._run, name="samark-batch-engine", daemon=True
                )
                self._worker.start()
            self._cond.notify_all()
        return futures

    def close(self) -> None:
        """Finish the queued draws, then stop the engine's thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            worker = self._worker
        if worker is not None:
            worker.join()

    def _next_batch(self) -> list[_Queued]:
        """Wait for draws; the next batch (empty once closed and drained). While fewer
        announced callers have a draw queued than are running, and the batch is not full,
        wait for them, at most ``linger_s``."""
        with self._cond:
            while not self._queue and not self._closed:
                self._cond.wait()
            deadline = time.monotonic() + self.linger_s
            while (
                not self._closed
                and len({caller for _, _, caller in self._queue}) < self._callers
                and sum(r.n for r, _, _ in self._queue) < self.max_rows
                and (left := deadline - time.monotonic()) > 0
            ):
                self._cond.wait(left)
            batch: list[_Queued] = []
            rows = 0
            while self._queue and (not batch or rows + self._queue[0][0].n <= self.max_rows):
                item = self._queue.pop(0)
                if item[1].set_running_or_notify_cancel():  # a cancelled draw is dropped
                    batch.append(item)
                    rows += item[0].n
            return batch

    def _run(self) -> None:
        try:
            while True:
                batch = self._next_batch()
                if not batch:
                    with self._cond:
                        if self._closed and not self._queue:
                            return
                    continue
                self.batches += 1
                self.draws += len(batch)
                self.largest = max(self.largest, len(batch))
                try:
                    self._draw(batch)
                except BaseException as exc:  # never leave a caller waiting
                    for _, future, _ in batch:
                        if not future.done():
                            future.set_exception(exc)
                    if not isinstance(exc, Exception):
                        raise
        finally:
            with self._cond:
                self._worker = None
                # draws queued after a fatal error start a new worker at their next submit
                if self._queue and not self._closed:
                    self._worker = threading.Thread(
                        target=self._run, name="samark-batch-engine", daemon=True
                    )
                    self._worker.start()

    def _draw(self, batch: list[_Queued]) -> None:
        """Run one batch and hand each caller its candidates (or its own error: where
        the batch fails, each draw is retried alone, so one bad draw fails only its
        caller)."""
        try:
            results = self.engine.sample_many([r for r, _, _ in batch])
        except Exception as exc:
            if len(batch) == 1:
                batch[0][1].set_exception(exc)
                return
            for request, future, _ in batch:
                try:
                    future.set_result(self.engine.sample_many([request])[0])
                except Exception as alone:
                    future.set_exception(alone)
            return
        for (_, future, _), result in zip(batch, results, strict=True):
            future.set_result(result)
