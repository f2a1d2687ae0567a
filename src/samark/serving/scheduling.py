"""Detection work in units, and the one worker thread that runs queued units by priority,
then in order of arrival.

The detection endpoint cuts each request into units of a few sentences
(:meth:`samark.serving.worker.Worker.detect`) and queues one unit at a time. With plain
arrival order a small check waits behind a unit of every large batch in flight; here a
request small enough to be one unit queues at a higher priority, so it waits for the unit
that is running and no other. Large requests share the rest in turn (each queues its next
unit only when the last is done). A flood of small checks can hold large ones back: the
per-token budget and the request timeout bound that.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from typing import ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")

#: the priorities of a unit: a whole small request, or part of a larger one
SMALL, LARGE = 0, 1

#: sentences of one unit of detection work (``Worker.detect``): about a short check's time
UNIT_SENTENCES = 8


def detection_units(counts: Sequence[int], sentences: int | None = None) -> list[list[int]]:
    """The texts (by index; ``counts``: each one's sentences) grouped in order up to
    ``sentences`` (default ``UNIT_SENTENCES``) sentences a group, a longer text alone: the
    units of one request's detection."""
    sentences = UNIT_SENTENCES if sentences is None else sentences
    units: list[list[int]] = []
    size = 0
    for i, count in enumerate(counts):
        n = max(1, count)
        if units and size + n <= sentences:
            units[-1].append(i)
            size += n
        else:
            units.append([i])
            size = n
    return units


def split_units(split: Sequence[Sequence[str]]) -> list[tuple[list[int], list[str]]]:
    """Each unit of texts (by index; ``split``: each text's sentences, as admitted) with
    its distinct sentences."""
    return [
        (group, list(dict.fromkeys(s for i in group for s in split[i])))
        for group in detection_units([len(s) for s in split])
    ]


class PriorityExecutor(Executor):
    """A one-thread executor: :meth:`submit_at` queues work at a priority (lower first),
    :meth:`submit` at ``LARGE``; equal priorities run in order of arrival."""

    def __init__(self, thread_name: str = "samark-priority") -> None:
        # (priority, order, run the work into its future, cancel that future)
        self._queue: list[tuple[int, int, Callable[[], None], Callable[[], bool]]] = []
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._shutdown = False
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)
        self._thread.start()

    def submit_at(self, priority: int, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn()
            except BaseException as exc:  # handed to the waiting caller
                future.set_exception(exc)
            else:
                future.set_result(result)

        with self._cond:
            if self._shutdown:
                raise RuntimeError("cannot schedule new work after shutdown")
            heapq.heappush(self._queue, (priority, next(self._order), run, future.cancel))
            self._cond.notify()
        return future

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        return self.submit_at(LARGE, lambda: fn(*args, **kwargs))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._cond:
            self._shutdown = True
            if cancel_futures:
                for _, _, _, cancel in self._queue:
                    cancel()
                self._queue.clear()
            self._cond.notify_all()
        if wait:
            self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._shutdown:
                    self._cond.wait()
                if not self._queue:
                    return
                _, _, run, _ = heapq.heappop(self._queue)
            run()
