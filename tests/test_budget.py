"""SAMark's cheaper budgets: semantic steering (``SAMarkConfig.steer``: its bias, its
cache, what it does to the real generator's draws) and row pruning (``prune_at``)."""

from __future__ import annotations

import numpy as np
import pytest

from samark.errors import SamarkError
from samark.sampling.base import SamplingParams
from samark.schemes.samark.config import SAMarkConfig
from samark.schemes.samark.steering import SemanticSteer, SummedBias, word_embeddings, word_tokens
from samark.token_layer import GreenListLayer


def _unit(rows: int, dim: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(rows, dim))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_steer_leans_with_the_flags_and_only_on_its_words() -> None:
    emb = _unit(500, 32, 0)
    pivots = np.linalg.qr(np.random.default_rng(1).normal(size=(32, 2)))[0].T
    ids = np.arange(100, 600)
    up = SemanticSteer(ids, emb, pivots, np.array([1.0, 1.0]), 2.0)
    down = SemanticSteer(ids, emb, pivots, np.array([-1.0, -1.0]), 2.0)
    np.testing.assert_allclose(up.values, -down.values, atol=1e-6)
    assert abs(float(up.values.mean())) < 1e-5  # standardised: no drift over the words
    assert float(up.values.std()) == pytest.approx(2.0, rel=0.2)
    bias = up.bias([[1, 2], [3]], 700)
    assert bias.shape == (2, 700)
    assert np.all(bias[:, :100] == 0) and np.all(bias[:, 600:] == 0)
    np.testing.assert_array_equal(bias[0], bias[1])
    # the word leaning most toward the flags gets the largest bias
    lean = (emb @ pivots.T).sum(axis=1)
    assert int(np.argmax(up.values)) == int(np.argmax(lean))
    assert not SemanticSteer(ids, emb, pivots, np.array([1.0, 1.0]), 0.0).values.any()
    with pytest.raises(ValueError, match="strength"):
        SemanticSteer(ids, emb, pivots, np.array([1.0, 1.0]), -1.0)
    with pytest.raises(ValueError, match="steer"):
        SAMarkConfig.of(steer=-0.5)


def test_summed_bias_adds_the_layers_each_on_its_own_context() -> None:
    green = GreenListLayer(b"steering-test-key-00000000000000", 300)
    steer = SemanticSteer(np.arange(50), _unit(50, 8, 2), np.eye(8)[:2], np.array([1.0, -1.0]), 1.0)
    both = SummedBias(green, steer)
    assert both.context == green.context
    contexts = [[5, 6, 7, 8], [9, 10, 11, 12]]
    np.testing.assert_allclose(
        both.bias(contexts, 300), green.bias(contexts, 300) + steer.bias(contexts, 300)
    )


@pytest.mark.slow
def test_steering_shifts_the_generator_toward_leaning_words(
    smollm2, mpnet, mpnet_key, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("SAMARK_CACHE_DIR", str(tmp_path))
    ids, emb = word_embeddings(mpnet, smollm2.tokenizer, smollm2.name, limit=400)
    assert len(ids) == 400 and emb.shape == (400, mpnet.dim)
    assert list(tmp_path.glob("steering/*.npz"))  # cached, and read back alike
    again_ids, again = word_embeddings(mpnet, smollm2.tokenizer, smollm2.name, limit=400)
    np.testing.assert_array_equal(again_ids, ids)
    np.testing.assert_array_equal(again, emb)  # the same table, computed or read back
    words = word_tokens(smollm2.tokenizer, 400)[1]
    assert all(w.isalpha() and len(w) >= 3 for w in words)

    pivots = mpnet_key.samark.pivots(mpnet.dim, 2)
    steer = SemanticSteer(ids, emb, pivots, np.array([1.0, -1.0]), 3.0)
    leaning = set(ids[steer.values > 0].tolist())
    prompt = "Write a short story about a day in the city. Once upon a time,"
    params = SamplingParams(temperature=1.0, top_p=0.95)

    def share(layer: SemanticSteer | None) -> float:
        out = smollm2.sample_tokens(prompt, 24, params, 10, seed=3, token_layer=layer)
        on_list = [t for t in out.ravel().tolist() if t in set(ids.tolist())]
        return sum(t in leaning for t in on_list) / max(1, len(on_list))

    plain, steered = share(None), share(steer)
    assert steered > plain + 0.15, (plain, steered)


def test_steering_needs_an_engine_that_applies_a_bias(mpnet, mpnet_key) -> None:
    from samark.sampling.openai_server import OpenAICompletionsEngine
    from samark.schemes import create_scheme

    remote = OpenAICompletionsEngine("http://127.0.0.1:9/v1", "some-model")
    with pytest.raises(SamarkError, match=r"steer.*transformers engine"):
        create_scheme("samark", key=mpnet_key, embedder=mpnet, engine=remote, steer=1.0)
    create_scheme("samark", key=mpnet_key, embedder=mpnet, engine=remote)  # steer 0: fine


class _LetterCount:
    """A row score for the engine's pruning: how often a letter occurs in the partial text."""

    at, keep = 3, 2

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    def score(self, partial_texts: list[str]) -> np.ndarray:
        self.seen.append(list(partial_texts))
        return np.array([t.count("e") + 0.01 * len(t) for t in partial_texts])


def test_engine_prunes_to_the_best_rows_after_at_tokens(smollm2) -> None:
    prompt = "The council met on Tuesday to discuss the new budget."
    params = SamplingParams(max_sentence_tokens=40)
    full = smollm2.sample(prompt, 12, params, seed=11)
    pruner = _LetterCount()
    cut = smollm2.sample(prompt, 12, params, seed=11, prune=pruner)
    assert len(pruner.seen) == 1  # scored once, after 3 tokens
    live = pruner.seen[0]
    scores = pruner.score(live)
    # the same draws up to the cut: rows that ended a sentence by then are the same candidates
    early = [i for i, c in enumerate(full.candidates) if c.n_tokens <= 3 and c.complete]
    for i in early:
        assert cut.candidates[i] == full.candidates[i]
    decoded_on = [c for c in cut.candidates if c.n_tokens > 3]
    assert len(decoded_on) == min(2, len(live))
    # the rows that went on are the two best-scoring partial texts
    best = {live[i] for i in np.argsort(-scores)[:2]}
    for c in decoded_on:  # a candidate's text starts with its partial text
        assert c.text is None or any(c.text.startswith(b) for b in best)
    assert cut.tokens_sampled < full.tokens_sampled


@pytest.mark.slow
def test_samark_with_pruning_samples_fewer_tokens_and_still_matches(mpnet, mpnet_key) -> None:
    from samark.schemes import create_scheme

    prompt = "City officials said on Monday that the bridge would reopen next month."
    plain = create_scheme("samark", key=mpnet_key, embedder=mpnet, candidates=8)
    pruned = create_scheme(
        "samark", key=mpnet_key, embedder=mpnet, candidates=8, prune_at=4, prune_keep=2
    )
    a = plain.generate(prompt, max_new_sentences=1, seed=1)
    b = pruned.generate(prompt, max_new_sentences=1, seed=1)
    assert len(b.sentences) == 1
    assert b.tokens_sampled < 0.75 * a.tokens_sampled
    assert all(step["candidates"] <= 8 for step in b.steps)
    with pytest.raises(ValueError, match="prune_keep"):
        SAMarkConfig.of(prune_at=4, prune_keep=0)


def test_samark_hands_the_engine_its_steering_and_pruning(
    smollm2, mpnet, mpnet_key, tmp_path, monkeypatch
) -> None:
    from samark.schemes import create_scheme
    from samark.schemes.samark.selection import PartialScore

    monkeypatch.setenv("SAMARK_CACHE_DIR", str(tmp_path))
    scheme = create_scheme(
        "samark", key=mpnet_key, embedder=mpnet, engine=smollm2, steer=1.0, steer_words=300
    )
    first = scheme.begin("A prompt.", np.random.default_rng(0))
    second = scheme.begin("A prompt.", np.random.default_rng(1))
    steer = scheme.sample_options(first).token_layer
    assert isinstance(steer, SemanticSteer) and len(steer.ids) == 300
    assert scheme.sample_options(first).prune is None
    assert second.steer.ids is steer.ids  # the word table is read once per scheme
    ids, emb = word_embeddings(mpnet, smollm2.tokenizer, smollm2.name, limit=300)
    pivots = mpnet_key.samark.pivots(mpnet.dim, 2)
    for state in (first, second):  # each generation leans toward its own flags
        own = SemanticSteer(ids, emb, pivots, state.flags, 1.0)
        np.testing.assert_array_equal(state.steer.values, own.values)
    pruned = create_scheme(
        "samark", key=mpnet_key, embedder=mpnet, engine=smollm2, prune_at=6, prune_keep=3
    )
    options = pruned.sample_options(pruned.begin("A prompt.", np.random.default_rng(0)))
    assert options.token_layer is None
    prune = options.prune
    assert isinstance(prune, PartialScore) and (prune.at, prune.keep) == (6, 3)
