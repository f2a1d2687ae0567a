"""The candidate engine samples from the model's own law, and its shared-prefix decoding is
exact. Statistical tests use fixed seeds, so they are deterministic, and could fail: a wrong
temperature, nucleus or cache changes the counts far beyond the tolerance."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import chi2_contingency, chisquare
from transformers import TemperatureLogitsWarper, TopPLogitsWarper

from samark.sampling import shared_prefix
from samark.sampling.base import SamplingParams

PREFIX = (
    "The city council voted on Tuesday to approve a new budget that raises spending on "
    "public transport. The mayor said"
)
PARAMS = SamplingParams(temperature=0.7, top_p=0.95)


def _model_law(lm, ids: list[int]) -> np.ndarray:
    """The next-token law after temperature and top-p, by transformers' own warpers."""
    with torch.inference_mode():
        logits = lm.model(torch.tensor([ids])).logits[:, -1, :].float()
    logits = TemperatureLogitsWarper(PARAMS.temperature)(None, logits)
    logits = TopPLogitsWarper(PARAMS.top_p)(None, logits)
    return torch.softmax(logits, dim=-1)[0].double().numpy()


def _gof(counts: np.ndarray, law: np.ndarray) -> float:
    """Chi-square goodness of fit, cells with expected < 5 pooled into one."""
    n = counts.sum()
    expected = law * n
    big = expected >= 5
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return float(chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


def test_first_token_follows_the_model_law(smollm2) -> None:
    ids = smollm2.encode_prefix(PREFIX, 1)
    draws = smollm2.sample_tokens(PREFIX, 4000, PARAMS, 1, seed=11)[:, 0].numpy()
    law = _model_law(smollm2, ids)
    counts = np.bincount(draws, minlength=law.size)
    assert counts[law == 0].sum() == 0  # nothing outside the nucleus
    assert _gof(counts, law) > 1e-3


def test_second_token_law_through_the_shared_cache(smollm2) -> None:
    """Conditioned on the first token, the second follows the model given prefix + token:
    checks the decode step (shared prefix KV, positions) and not only the first draw."""
    ids = smollm2.encode_prefix(PREFIX, 2)
    draws = smollm2.sample_tokens(PREFIX, 1500, PARAMS, 2, seed=5).numpy()
    first = np.bincount(draws[:, 0]).argmax()
    second = draws[draws[:, 0] == first, 1]
    assert second.size > 300
    law = _model_law(smollm2, [*ids, int(first)])
    counts = np.bincount(second, minlength=law.size)
    assert counts[law == 0].sum() == 0
    assert _gof(counts, law) > 1e-3


@pytest.mark.slow
def test_first_tokens_match_model_generate(smollm2) -> None:
    """Two-sample test against transformers' own ``generate`` with the same settings
    (a short prompt: ``generate`` prefills every row)."""
    short = "The mayor said"
    ids = smollm2.encode_prefix(short, 1)
    ours = smollm2.sample_tokens(short, 1000, PARAMS, 1, seed=2)[:, 0].numpy()
    torch.manual_seed(3)
    with torch.inference_mode():
        out = smollm2.model.generate(
            torch.tensor([ids]).repeat(1000, 1),
            do_sample=True,
            temperature=PARAMS.temperature,
            top_p=PARAMS.top_p,
            top_k=0,
            max_new_tokens=1,
            pad_token_id=0,
        )
    theirs = out[:, -1].numpy()
    tokens = np.union1d(ours, theirs)
    table = np.array([[np.sum(ours == t), np.sum(theirs == t)] for t in tokens])
    big = table.sum(axis=1) >= 10
    table = np.vstack([table[big], table[~big].sum(axis=0)])
    table = table[table.sum(axis=1) > 0]
    assert chi2_contingency(table).pvalue > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("context", [12, 300])
def test_shared_prefix_logits_equal_full_recompute(smollm2, context) -> None:
    """Decoding three tokens per row through shared-prefix attention gives the logits of a
    plain forward pass over prefix + tokens."""
    from samark.sampling.transformers_engine import BatchDecoder

    text = " ".join([PREFIX] * 12)
    ids = smollm2.tokenizer(text)["input_ids"][:context]
    rng = np.random.default_rng(0)
    rows = torch.tensor(rng.integers(100, 5000, size=(3, 3)))
    dec = BatchDecoder(smollm2.model, ids, 3, 8, share_prefix=True)
    assert dec.shared
    with torch.inference_mode():
        for step in range(3):
            got = dec.step(rows[:, step])
        dec.keep([0, 2])  # dropping a row keeps the others' caches intact
        got_kept = dec.step(torch.tensor([7, 9]))
        full = smollm2.model(torch.cat([torch.tensor([ids] * 3), rows], dim=1)).logits[:, -1]
        torch.testing.assert_close(got, full, atol=2e-4, rtol=1e-4)
        more = torch.cat([torch.tensor([ids] * 2), rows[[0, 2]], torch.tensor([[7], [9]])], 1)
        torch.testing.assert_close(
            got_kept, smollm2.model(more).logits[:, -1], atol=2e-4, rtol=1e-4
        )


def test_shared_prefix_falls_back_beyond_a_sliding_window(smollm2) -> None:
    cfg = smollm2.model.config
    old = getattr(cfg, "sliding_window", None)
    try:
        cfg.sliding_window = 16
        assert not shared_prefix.supports(smollm2.model, 40)
        assert shared_prefix.supports(smollm2.model, 10)
    finally:
        cfg.sliding_window = old


@pytest.mark.slow
@pytest.mark.filterwarnings("error::FutureWarning")
def test_engine_is_the_same_with_and_without_shared_prefix(smollm2) -> None:
    """Same seed, same candidates: the fast path changes the cost, not the samples. Both
    paths pass the KV cache under the name this transformers uses (a deprecated name warns)."""
    smollm2.share_prefix = False
    try:
        slow = smollm2.sample(PREFIX, 6, PARAMS, seed=9)
    finally:
        smollm2.share_prefix = True
    fast = smollm2.sample(PREFIX, 6, PARAMS, seed=9)
    assert [c.text for c in fast.candidates] == [c.text for c in slow.candidates]
    assert fast.tokens_sampled == slow.tokens_sampled


def test_rows_of_several_prefixes_decode_in_one_batch_exactly(smollm2) -> None:
    """Rows of two prefixes of different lengths in one batch: each row gets the logits of
    a plain forward pass over its own prefix + tokens, also after rows leave."""
    from samark.sampling.transformers_engine import BatchDecoder

    ids = [
        smollm2.tokenizer(PREFIX)["input_ids"],
        smollm2.tokenizer(" ".join([PREFIX] * 3))["input_ids"],
    ]
    rows = torch.tensor(np.random.default_rng(1).integers(100, 5000, size=(5, 3)))

    def plain(prefix: list[int], tokens: torch.Tensor) -> torch.Tensor:
        full = torch.cat([torch.tensor([prefix] * len(tokens)), tokens], dim=1)
        return smollm2.model(full).logits[:, -1]

    with torch.inference_mode():
        dec = BatchDecoder.for_prefixes(smollm2.model, ids, [2, 3], 8)
        for step in range(3):
            got = dec.step(rows[:, step])
        want = torch.cat([plain(ids[0], rows[:2]), plain(ids[1], rows[2:])])
        torch.testing.assert_close(got, want, atol=2e-4, rtol=1e-4)
        dec.keep([1, 4])  # one row of each prefix stays
        got = dec.step(torch.tensor([7, 9]))
        more = torch.tensor([[7], [9]])
        want = torch.cat(
            [
                plain(ids[0], torch.cat([rows[1:2], more[:1]], 1)),
                plain(ids[1], torch.cat([rows[4:5], more[1:]], 1)),
            ]
        )
        torch.testing.assert_close(got, want, atol=2e-4, rtol=1e-4)
        dec.keep([1])  # the first prefix has no row left; the second decodes on
        got = dec.step(torch.tensor([11]))
        last = torch.cat([rows[4:5], more[1:], torch.tensor([[11]])], 1)
        torch.testing.assert_close(got, plain(ids[1], last), atol=2e-4, rtol=1e-4)


class _ShortestFirst:
    """A row pruner (the engine's RowPruner protocol): after ``at`` tokens keep the
    ``keep`` rows whose partial text is shortest."""

    at, keep = 3, 2

    def score(self, partial_texts: list[str]) -> np.ndarray:
        return -np.array([len(t) for t in partial_texts], dtype=float)


@pytest.mark.slow
def test_sample_many_draws_what_each_request_draws_alone(smollm2) -> None:
    """Three requests in one batch, with their own prefixes, sizes, caps and seeds, one
    with a token layer and one pruned: each gets exactly the candidates it gets alone.
    (The batch's logits differ from a lone draw's by rounding, about 1e-5; that flips a
    draw with a probability of the order of 1e-6 per token, and would change the rest of
    that request's rows.)"""
    from samark.sampling.base import SampleRequest
    from samark.token_layer import GreenListLayer

    layer = GreenListLayer(b"k" * 32, smollm2.model.config.vocab_size)
    pruner = _ShortestFirst()
    requests = [
        SampleRequest(PREFIX, 4, SamplingParams(max_sentence_tokens=16), seed=3),
        SampleRequest(
            "Scientists found a new species of frog in Peru. The team",
            3,
            SamplingParams(temperature=0.9, top_p=0.9, max_sentence_tokens=20),
            seed=4,
            token_layer=layer,
        ),
        SampleRequest(PREFIX, 5, SamplingParams(max_sentence_tokens=12), seed=5, prune=pruner),
    ]
    together = smollm2.sample_many(requests)
    for request, batch in zip(requests, together, strict=True):
        alone = smollm2.sample(
            request.prefix,
            request.n,
            request.params,
            seed=request.seed,
            token_layer=request.token_layer,
            prune=request.prune,
        )
        assert len(batch.candidates) == request.n
        assert batch.prompt_tokens == alone.prompt_tokens
        assert batch.candidates == alone.candidates and batch.tokens_sampled == alone.tokens_sampled
        assert all(c.n_tokens <= request.params.max_sentence_tokens for c in batch.candidates)
    # the pruned request's rows past ``at`` tokens: at most ``keep`` of them
    assert sum(c.n_tokens > pruner.at for c in together[2].candidates) <= pruner.keep


@pytest.mark.slow
def test_written_texts_in_one_batch_are_those_written_alone(smollm2) -> None:
    """Texts written together (the token rows' batches): each with its own prefix, budget,
    seed and processor (SynthID's keeps state across steps, so each text owns one) is the
    text it gets alone; one asked for 1 sentence stops once the second begins, one with
    a budget only writes to its budget."""
    from transformers import SynthIDTextWatermarkingConfig

    from samark.sampling.token_writing import WriteRequest
    from samark.segment import split_sentences

    synthid = SynthIDTextWatermarkingConfig(keys=list(range(1, 31)), ngram_len=5)

    def requests() -> list[WriteRequest]:
        vocab = smollm2.model.config.vocab_size
        return [
            WriteRequest(PREFIX, 48, seed=1, sentences=1),
            WriteRequest(
                "Scientists found a new species of frog in Peru. The team",
                40,
                temperature=0.9,
                top_p=0.9,
                seed=2,
                watermark=synthid.construct_processor(vocab, "cpu"),
                sentences=1,
            ),
            WriteRequest(PREFIX, 20, seed=3),
        ]

    together = smollm2.write_many(requests())
    alone = [smollm2.write_many([r])[0] for r in requests()]
    for a, b in zip(together, alone, strict=True):
        assert a.tokens == b.tokens and a.tokens_sampled == b.tokens_sampled
        assert a.finish_reason == b.finish_reason
    assert together[2].finish_reason == "length" and len(together[2].tokens) == 20
    assert together[0].finish_reason == "sentences"
    for w, budget in zip(together[:2], (48, 40), strict=True):
        if w.finish_reason == "sentences":  # a second sentence had begun, not more
            parts = split_sentences(smollm2.decode(list(w.tokens)))
            assert len(parts) == 2 and len(w.tokens) < budget


def test_a_steps_rounds_prefill_its_context_once_and_draw_as_before(smollm2) -> None:
    """Draws in rounds on one prefix (the adaptive budget, an extra batch) reuse its
    prefill: the later rounds hit the prefix cache, and every round's candidates are
    exactly those drawn without the cache, under the same seeds."""
    from samark.sampling.base import SampleRequest

    cache = smollm2.prefixes
    assert cache is not None
    text = " ".join([PREFIX] * 4)
    requests = [SampleRequest(text, 3, PARAMS, seed=s) for s in (1, 2, 3)]
    cache.clear()
    hits = cache.hits
    rounds = [smollm2.sample_many([r])[0] for r in requests]
    assert cache.hits - hits == 2 and len(cache) == 1 and cache.bytes > 0
    smollm2.prefixes = None
    try:
        plain = [smollm2.sample_many([r])[0] for r in requests]
    finally:
        smollm2.prefixes = cache
    assert [[c.text for c in b.candidates] for b in rounds] == [
        [c.text for c in b.candidates] for b in plain
    ]
    # concurrent requests' rounds batched together reuse each request's prefill too
    other = SampleRequest(PREFIX, 2, PARAMS, seed=4)
    hits = cache.hits
    smollm2.sample_many([requests[0], other])
    smollm2.sample_many([requests[1], other])
    assert cache.hits - hits >= 3


def test_the_prefix_cache_keeps_within_its_budget(smollm2) -> None:
    from samark.sampling.batch_decoder import PrefixCache
    from samark.sampling.transformers_engine import BatchDecoder

    ids = [smollm2.tokenizer(f"{PREFIX} {i}")["input_ids"] for i in range(3)]
    one = PrefixCache()
    with torch.inference_mode():
        BatchDecoder(smollm2.model, ids[0], 2, 4, prefixes=one)
    size = one.bytes
    small = PrefixCache(max_bytes=int(size * 2.5))
    with torch.inference_mode():
        for x in ids:
            BatchDecoder(smollm2.model, x, 2, 4, prefixes=small)
    assert len(small) == 2 and small.bytes <= small.max_bytes
    assert small.get(ids[0]) is None and small.get(ids[2]) is not None  # oldest out
    # a decoder that grows its cache in place (no shared-prefix attention) never uses it
    kept = PrefixCache()
    with torch.inference_mode():
        BatchDecoder(smollm2.model, ids[0], 2, 4, share_prefix=False, prefixes=kept)
    assert len(kept) == 0
