"""Concurrent generations share the local engine's batches (``BatchingEngine``): callers
that run at once decode in one batch, each gets its own candidates, and one caller's bad
draw fails only that caller."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from samark.sampling.base import SamplingParams
from samark.sampling.batching import BatchingEngine

PARAMS = SamplingParams(max_sentence_tokens=24)
PREFIXES = [
    "The city council met on Monday to discuss the new budget. The mayor said",
    "Scientists have found a new species of frog in the rainforests of Peru. The team",
    "The river rose overnight and flooded the lower streets of the town. Shop owners",
]


class _Broken:
    """A token layer whose bias fails (a caller's bad request)."""

    context = 0

    def bias(self, contexts, width) -> np.ndarray:
        raise ValueError("this layer is broken")


def _concurrently(sampler: BatchingEngine, work) -> list:
    """Run ``work(i)`` for each prefix in its own announced caller thread."""
    results: list = [None] * len(PREFIXES)
    start = threading.Barrier(len(PREFIXES))

    def run(i: int) -> None:
        with sampler.caller():
            start.wait()
            try:
                results[i] = work(i)
            except Exception as exc:
                results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(PREFIXES))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    return results


@pytest.mark.slow
def test_concurrent_callers_decode_in_one_batch_and_get_their_own_candidates(smollm2) -> None:
    sampler = BatchingEngine(smollm2, linger_s=60)
    assert sampler.abilities == smollm2.abilities and sampler.name == smollm2.name  # the engine's
    try:
        got = _concurrently(sampler, lambda i: sampler.sample(PREFIXES[i], 2 + i, PARAMS, seed=i))
    finally:
        sampler.close()
    assert sampler.batches == 1 and sampler.largest == 3
    for i, batch in enumerate(got):
        alone = smollm2.sample(PREFIXES[i], 2 + i, PARAMS, seed=i)
        assert len(batch.candidates) == 2 + i
        assert batch.prompt_tokens == alone.prompt_tokens
        assert batch.candidates == alone.candidates  # see test_sample_many_draws_what_...


def test_a_bad_draw_fails_only_its_caller(smollm2) -> None:
    sampler = BatchingEngine(smollm2, linger_s=60)
    try:
        got = _concurrently(
            sampler,
            lambda i: sampler.sample(
                PREFIXES[i], 2, PARAMS, seed=i, token_layer=_Broken() if i == 1 else None
            ),
        )
    finally:
        sampler.close()
    assert isinstance(got[1], ValueError) and "broken" in str(got[1])
    assert all(len(got[i].candidates) == 2 for i in (0, 2))
    with pytest.raises(RuntimeError, match="closed"):
        sampler.sample(PREFIXES[0], 1, PARAMS)


def test_the_queue_counts_tokens_as_its_engine(smollm2) -> None:
    """``count_tokens`` is declared by every engine; the queue's is its engine's."""
    sampler = BatchingEngine(smollm2)
    text = " The council met again on Thursday."
    ids = smollm2.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert sampler.count_tokens(text) == smollm2.count_tokens(text) == len(ids)
    assert len(ids) != len(text.split())  # tokens, not words
