"""samark-layered: the green-list token layer, its exact p-value, its place in the candidate
engine, and the combined detector."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import binom, chisquare, combine_pvalues, kstest

from samark.errors import SamarkError
from samark.schemes.samark.layer_combination import combine_p_values, combined_z, fisher_two
from samark.token_layer import GreenListLayer, TokenLayerConfig

VOCAB = 49152
HUMAN = (
    "The river rose overnight and flooded the lower streets of the town. Shop owners "
    "moved their goods upstairs before dawn. By noon the water had started to fall, and "
    "volunteers arrived with pumps and sandbags from the neighbouring villages."
)


def _layer(i: int, **config: float) -> GreenListLayer:
    return GreenListLayer(f"token-layer-key-{i:06d}".encode(), VOCAB, TokenLayerConfig(**config))


def test_green_list_is_the_keys_and_its_context() -> None:
    a, b, other = _layer(1), _layer(1), _layer(2)
    ctx = [11, 22, 33, 44]
    green = a.green_mask(ctx)
    assert green.shape == (VOCAB,) and green.dtype == bool
    assert abs(green.mean() - 0.25) < 0.01  # gamma of the vocabulary
    assert np.array_equal(green, b.green_mask(ctx))  # deterministic for the key
    assert (green != other.green_mask(ctx)).mean() > 0.3  # another key, another list
    assert (green != a.green_mask([11, 22, 33, 45])).mean() > 0.3  # another context
    # only the last `context` tokens count
    assert np.array_equal(green, a.green_mask([99, 98, *ctx]))
    narrow = _layer(1, context=1)
    assert np.array_equal(narrow.green_mask([5, 7]), narrow.green_mask([7]))
    bias = a.bias([ctx, [1, 2, 3, 4]], VOCAB + 64)  # padded logits: the tail is never green
    assert bias.shape == (2, VOCAB + 64) and not bias[:, VOCAB:].any()
    assert np.array_equal(bias[0, :VOCAB] > 0, green) and set(np.unique(bias)) == {0.0, 2.0}
    # the spec another process (vLLM's engine core) rebuilds the layer from
    again = GreenListLayer.from_spec(a.to_spec())
    assert np.array_equal(again.green_mask(ctx), green) and again.config == a.config
    assert "secret" not in repr(a) and a.to_spec()["secret"] not in repr(a)
    with pytest.raises(ValueError):
        GreenListLayer(b"short", VOCAB)
    with pytest.raises(ValueError):
        TokenLayerConfig(gamma=1.0)


@pytest.mark.parametrize(("gamma", "context"), [(0.25, 4), (0.5, 1), (0.1, 16)])
def test_the_bias_on_a_device_is_the_bias(gamma: float, context: int) -> None:
    """``bias_on`` (the engine's path on a GPU: the hash in int64 torch arithmetic) gives
    exactly ``bias``'s values, run here on the CPU: seeds over the whole 64-bit range,
    padded logits, several gammas."""
    rng = np.random.default_rng(1)
    layer = _layer(3, gamma=gamma, context=context)
    contexts = [[int(t) for t in rng.integers(0, VOCAB, context)] for _ in range(64)]
    for width in (VOCAB, VOCAB + 64):
        expected = torch.from_numpy(layer.bias(contexts, width))
        assert torch.equal(layer.bias_on(contexts, width, "cpu"), expected)
    assert {layer.seed(c) >= 2**63 for c in contexts} == {True, False}  # both signs tested


def test_token_layer_counts_distinct_pairs_and_its_p_value_is_exact_over_keys() -> None:
    """Over keys, a fixed token sequence's green count among distinct (context, token)
    pairs is Binomial(n, gamma): 2,000 keys on one text give the binomial's mean and a
    lower tail no heavier than uniform."""
    rng = np.random.default_rng(0)
    ids = [int(t) for t in rng.integers(0, VOCAB, 120)]
    assert _layer(0).score(ids).n_scored == 120 - 4  # the first 4 tokens have no context
    # a copy of the text adds only the 4 pairs that straddle the join
    assert _layer(0).score(ids + ids).n_scored == 120 - 4 + 4
    scores = [_layer(i).score(ids) for i in range(2000)]
    greens = np.array([x.n_green for x in scores])
    n = scores[0].n_scored
    assert abs(greens.mean() - 0.25 * n) < 4 * np.sqrt(n * 0.25 * 0.75 / 2000)
    p = np.array([x.p_value for x in scores])
    assert (p < 0.05).sum() <= binom.ppf(0.999, 2000, 0.05)
    assert kstest(p, "uniform", alternative="greater").pvalue > 1e-3
    # the exact tail
    g = int(greens[0])
    assert scores[0].p_value == pytest.approx(binom.sf(g - 1, n, 0.25))
    assert _layer(0).score([1, 2, 3]).p_value == 1.0  # nothing to score


def test_fisher_combination_and_the_contradiction_rule() -> None:
    for p1, p2 in [(0.3, 0.7), (1e-4, 0.2), (0.01, 0.01), (1.0, 1.0)]:
        assert fisher_two(p1, p2) == pytest.approx(combine_pvalues([p1, p2]).pvalue)
    assert combine_p_values(1e-6, 0.5) == pytest.approx(fisher_two(1e-6, 0.5))
    # one layer strongly against its mark: the other cannot carry the decision alone
    assert combine_p_values(1e-9, 0.995) == 0.995
    # ... and a text whose semantic layer sits at p = 1 still gets a finite z (a record
    # holds it; the length stage once wrote null for three human prefixes)
    assert combined_z(combine_p_values(1.0, 0.1)) == pytest.approx(-8.21, abs=0.01)
    assert np.isfinite(combined_z(0.0)) and combined_z(0.5) == pytest.approx(0.0)
    assert combine_p_values(1e-3, 0.2, method="both") == 0.2
    # Cauchy: about twice the smaller p-value when the other layer is destroyed
    assert combine_p_values(0.004, 0.5, method="cauchy") == pytest.approx(0.008, rel=1e-3)
    assert combine_p_values(0.004, 0.5, method="cauchy") < combine_p_values(0.004, 0.5)
    # valid under H0: independent uniforms give a uniform combined p-value
    rng = np.random.default_rng(1)
    u = rng.random((20000, 2))
    for method in ("fisher", "cauchy"):
        p = np.array([combine_p_values(a, b, method=method) for a, b in u])
        assert abs((p < 0.01).mean() - 0.01) < 0.003 and (p < 0.05).mean() < 0.055, method


def test_biased_nucleus_sampling_has_the_watermarked_law() -> None:
    """Within the model's nucleus, token v is drawn with probability proportional to
    p_v exp(bias_v); outside it never; without a bias the draws are unchanged."""
    from samark.sampling.transformers_engine import sample_top_p

    logits = torch.tensor([[3.0, 2.5, 2.0, 1.0, -2.0, -4.0]]).repeat(40000, 1)
    bias = torch.tensor([[0.0, 2.0, 0.0, 2.0, 2.0, 0.0]]).repeat(40000, 1)
    gen = torch.Generator().manual_seed(0)
    draws = sample_top_p(logits, 1.0, 0.9, gen, bias)
    probs = torch.softmax(logits[0], -1)
    above = torch.cumsum(probs, 0) - probs
    kept = torch.where(above < 0.9, probs * torch.exp(bias[0]), torch.zeros_like(probs))
    expected = (kept / kept.sum()).numpy()
    counts = np.bincount(draws.numpy(), minlength=6)
    assert counts[expected == 0].sum() == 0
    nz = expected > 0
    assert chisquare(counts[nz], expected[nz] * counts.sum()).pvalue > 1e-3
    a = sample_top_p(logits[:50], 0.7, 0.95, torch.Generator().manual_seed(3))
    b = sample_top_p(logits[:50], 0.7, 0.95, torch.Generator().manual_seed(3), None)
    assert torch.equal(a, b)


@pytest.mark.slow
def test_token_layer_is_the_same_with_and_without_shared_prefix(smollm2) -> None:
    """The layer acts on logits only: the shared-prefix engine and transformers' expanded
    cache draw the same watermarked tokens, and they lean green."""
    from samark.sampling.base import SamplingParams

    layer = GreenListLayer(b"engine-layer-key-000000000000000", 49152)
    params = SamplingParams()
    prompt = "The city council met on Monday to discuss the new budget for schools."
    shared = smollm2.sample_tokens(prompt, 8, params, 12, seed=5, token_layer=layer)
    smollm2.share_prefix = False
    try:
        expanded = smollm2.sample_tokens(prompt, 8, params, 12, seed=5, token_layer=layer)
    finally:
        smollm2.share_prefix = True
    assert torch.equal(shared, expanded)
    plain = smollm2.sample_tokens(prompt, 8, params, 12, seed=5)
    assert not torch.equal(shared, plain)
    prefix = smollm2.encode_prefix(prompt, 12)
    rows = [prefix + r for r in shared.tolist()]
    green = [
        layer.is_green(r[: len(prefix) + j], r[len(prefix) + j]) for r in rows for j in range(12)
    ]
    assert np.mean(green) > 0.35  # gamma 0.25 without the layer


@pytest.mark.slow
def test_layered_scheme_detects_its_own_text_with_both_layers(mpnet, mpnet_key, smollm2) -> None:
    from samark.keys import WatermarkKey
    from samark.schemes import create_scheme

    # 6 candidates a sentence: the token layer alone gives p_token < 1e-3 over 4 sentences
    scheme = create_scheme("samark-layered", key=mpnet_key, embedder=mpnet, candidates=6)
    assert scheme.config.detection.statistic == "scan"
    prompt = "Scientists have found a new species of frog in the rainforests of Peru."
    g = scheme.generate(prompt, max_new_sentences=4, seed=2)
    assert g.scheme == "samark-layered" and len(g.sentences) == 4
    d = scheme.detect(g.text)
    assert d.scheme == "samark-layered" and d.unit == "sentence" and d.n_units == 4
    assert d.details["p_token"] < 1e-3 and d.details["green_fraction"] > 0.35, d.details
    assert d.p_value == pytest.approx(
        combine_p_values(d.details["p_semantic"], d.details["p_token"])
    )
    assert d.p_value < 0.01 and len(d.sentence_p_values) == 4
    assert d.to_dict()["details"]["p_token"] == d.details["p_token"]  # JSON-safe floats
    [many] = scheme.detect_many([g.text])
    assert many is not None and many.p_value == pytest.approx(d.p_value, abs=2e-3)
    # whitespace around a pasted text changes nothing (issue 56: a trailing newline and
    # leading spaces once moved the token layer's p-value)
    for pasted in (g.text + "\n", "   " + g.text, "\n\t" + g.text + "  \n\n"):
        again = scheme.detect(pasted)
        assert again.p_value == d.p_value and again.details["p_token"] == d.details["p_token"]
    other = create_scheme(
        "samark-layered",
        key=WatermarkKey(b"another-test-key-000000000000000", mpnet_key.embedder),
        embedder=mpnet,
    )
    assert other.detect(g.text).details["p_token"] > 1e-3
    # seeded: the same first step again
    assert scheme.generate(prompt, max_new_sentences=1, seed=2).sentences == g.sentences[:1]


def test_layered_p_value_is_valid_on_human_text_over_keys(mpnet, news_leads) -> None:
    """One key per human text (120 six-sentence CNN/DailyMail leads): the combined
    p-value's lower tail stays within the binomial bound and is no heavier than uniform.
    Detection loads the tokenizer only, never the generator."""
    from samark.keys import WatermarkKey
    from samark.schemes import create_scheme
    from samark.segment import split_sentences

    texts, stored = news_leads
    texts = texts[-120:]
    p_sem, p_tok, p = [], [], []
    with mpnet.remembering(stored):  # the rest embedded once, in one batched call
        mpnet.encode([s for t in texts for s in split_sentences(t)])
        for i, text in enumerate(texts):
            key = WatermarkKey(f"layered-fpr-{i:04d}".encode().ljust(32, b"0"), mpnet.identity)
            d = create_scheme("samark-layered", key=key, embedder=mpnet, n_null=199).detect(text)
            p_sem.append(d.details["p_semantic"])
            p_tok.append(d.details["p_token"])
            p.append(d.p_value)
    bound = binom.ppf(0.999, len(texts), 0.05)
    for name, values in (("semantic", p_sem), ("token", p_tok), ("combined", p)):
        assert sum(x < 0.05 for x in values) <= bound, name
        assert kstest(values, "uniform", alternative="greater").pvalue > 1e-3, name


def test_layered_scheme_refuses_an_engine_that_cannot_apply_its_token_layer(
    mpnet, mpnet_key
) -> None:
    from samark.sampling.openai_server import OpenAICompletionsEngine
    from samark.schemes import create_scheme

    remote = OpenAICompletionsEngine("http://127.0.0.1:9/v1", "some-model")
    with pytest.raises(SamarkError, match=r"transformers engine.*vLLM"):
        create_scheme("samark-layered", key=mpnet_key, embedder=mpnet, engine=remote)
    with pytest.raises(ValueError, match="combine"):
        create_scheme("samark-layered", key=mpnet_key, embedder=mpnet, combine="sum")
    with pytest.raises(ValueError, match="gamma"):
        create_scheme("samark-layered", key=mpnet_key, embedder=mpnet, gamma=0.0)
    layered = create_scheme("samark-layered", key=mpnet_key, embedder=mpnet)
    plain = create_scheme("samark", key=mpnet_key, embedder=mpnet)
    assert layered.detector_id() != plain.detector_id()
    assert (
        layered.detector_id()
        != create_scheme("samark-layered", key=mpnet_key, embedder=mpnet, context=2).detector_id()
    )
