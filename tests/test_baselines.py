"""Token-level baselines through transformers' own watermarking, on the real generator."""

from __future__ import annotations

import pytest

from samark.errors import EmptyTextError, SamarkError
from samark.schemes import create_scheme
from samark.schemes.base import scheme_info
from samark.segment import first_sentence

PROMPTS = [
    "The city council met on Monday to discuss the new budget for schools.",
    "Scientists have found a new species of frog in the rainforests of Peru, where "
    "heavy rain had kept researchers away for years.",
]
HUMAN = (
    "The river rose overnight and flooded the lower streets of the town. Shop owners "
    "moved their goods upstairs before dawn. By noon the water had started to fall, and "
    "volunteers arrived with pumps and sandbags from the neighbouring villages."
)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["kgw", "synthid"])
def test_token_watermark_detects_its_own_text_only(name, mpnet_key, smollm2) -> None:
    scheme = create_scheme(name, key=mpnet_key)
    gens = scheme.generate_batch(PROMPTS, max_new_sentences=3, seed=0)
    assert len(gens) == 2
    for g in gens:
        assert len(g.sentences) == 3 and g.text  # the asked length, as SAMark writes
        assert g.tokens_sampled >= g.output_tokens > 0
        d = scheme.detect(g.text)
        assert d.scheme == name and d.p_value < 0.01, (d.p_value, g.text)
    human = scheme.detect(HUMAN)
    assert human.p_value > 0.01
    # same seed, same tokens: a one-sentence run under it writes each text's beginning
    again = scheme.generate_batch(PROMPTS, max_new_sentences=1, seed=0)
    assert all(g.text.startswith(a.text) for g, a in zip(gens, again, strict=True))
    assert any(a.text for a in again)


NEW_ROWS = ["unigram", "exp", "morphmark"]


@pytest.mark.slow
@pytest.mark.parametrize("name", NEW_ROWS)
def test_our_token_rows_detect_their_own_text_and_not_another_keys(
    name, mpnet_key, smollm2
) -> None:
    """Unigram, EXP and MorphMark, written by our own logits processors inside
    transformers' generate: detected with their key, not with another key."""
    from samark.keys import WatermarkKey

    scheme = create_scheme(name, key=mpnet_key)
    other = create_scheme(
        name, key=WatermarkKey(b"another-test-key-000000000000000", mpnet_key.embedder)
    )
    gens = scheme.generate_batch(PROMPTS, max_new_sentences=4, seed=0)
    for g in gens:
        assert len(g.sentences) == 4
        d = scheme.detect(g.text)
        assert d.unit == "token" and d.n_units > 20 and d.p_value < 0.05, (d, g.text)
    # margins, not one sample's luck: over seeds (and CPUs that sample other texts) a 4-sentence
    # text of these rows ranges from p ~ 1e-9 to ~ 0.04; both texts together are far below
    both = " ".join(g.text for g in gens)
    assert scheme.detect(both).p_value < 1e-3
    assert other.detect(both).p_value > 1e-3
    again = scheme.generate_batch(PROMPTS, max_new_sentences=1, seed=0)  # same seed, same start
    assert all(g.text.startswith(a.text) for g, a in zip(gens, again, strict=True))
    assert any(a.text for a in again)
    with pytest.raises(EmptyTextError):
        scheme.detect("")


@pytest.mark.slow
def test_token_detectors_hold_their_false_positive_rate_on_human_text(mpnet_key, smollm2) -> None:
    """100 human news windows (the rows' rates over 1,000 human texts: the paper run,
    experiments/paper.toml). With one key, the share with p < 0.05 stays within the
    binomial bound for every detector. The exact p-values (Unigram's hypergeometric, EXP's
    Gamma, SynthID's binomial) are exact over keys: one key per text, they are uniform. (With
    one key for all texts they need not be: a fixed green list colours the common tokens
    of every text alike.)"""
    from scipy.stats import binom, kstest

    from samark.datasets import human_windows, load_dataset
    from samark.keys import WatermarkKey

    texts = [d.text for d in human_windows(load_dataset("cnn_dailymail"), sentences=6, count=100)]
    assert len(texts) == 100
    bound = binom.ppf(0.999, len(texts), 0.05)
    for name in ["kgw", "synthid", *NEW_ROWS, "upv"]:
        scheme = create_scheme(name, key=mpnet_key)
        p = [scheme.detect(t).p_value for t in texts]
        assert sum(x < 0.05 for x in p) <= bound, name
    for name in ("unigram", "exp", "synthid"):
        p = []
        for i, text in enumerate(texts):
            key = WatermarkKey(
                f"fpr-key-{name}-{i:04d}".encode().ljust(32, b"0"), mpnet_key.embedder
            )
            p.append(create_scheme(name, key=key).detect(text).p_value)  # one LM per process
        # discrete p-values are conservative: test the lower tail and the overall shape
        assert sum(x < 0.05 for x in p) <= bound, name
        assert kstest(p, "uniform", alternative="greater").pvalue > 1e-3, name


@pytest.mark.slow
def test_upv_network_is_the_keys_and_reads_the_previous_token() -> None:
    """UPV's green network is trained from the key's seed alone: the same seed gives the
    same network, another seed other colours; a token's colour depends on the token
    before it (else the list would be Unigram's fixed one)."""
    import torch

    from samark.schemes.upv import train_green_network

    windows = torch.randint(1, 49152, (4000, 2), generator=torch.Generator().manual_seed(0))
    fit = train_green_network.__wrapped__  # not the per-process cache
    # 10 of the recipe's 300 epochs: what is checked (seeded, keyed, reads the previous
    # token) holds from the start of training (60 epochs took 6x as long for the same checks)
    a, b, c = (fit(seed, 49152, epochs=10) for seed in (1, 1, 2))
    assert torch.equal(a(windows), b(windows))
    assert (a(windows) > 0.5).ne(c(windows) > 0.5).float().mean() > 0.2
    # the green list depends on the previous token, not only on the token
    one = torch.stack([torch.full((4000,), 7), windows[:, 1]], 1)
    two = torch.stack([torch.full((4000,), 9000), windows[:, 1]], 1)
    assert (a(one) > 0.5).ne(a(two) > 0.5).any()


@pytest.mark.slow
def test_upv_detects_its_own_text_and_not_another_keys(mpnet_key, smollm2) -> None:
    """UPV at its defaults (gamma 0.5, delta 2 on the top 20 of what nucleus sampling
    keeps) marks this 135M model's text weakly, as MorphMark's gamma 0.5 does: two 6-sentence
    texts had a green share of about 0.6 and p ~ 0.004 together (the paper run measures
    that row). The mechanism is tested with delta 3 (at delta 4 the model often runs on
    past the token budget without ending a sentence, and writes nothing): detected with its
    key, not with another key, and the unwatermarked model's text is not detected. The
    marking key's network is the recipe's (300 epochs: the one the false-positive test
    above trains, kept per process); the other key's has 30 epochs: any network but this
    key's must read the text as chance (p ~ 0.8 at 30 epochs as at 300), and a second
    300-epoch training was a minute of this test on the loaded 2-core machine."""
    from samark.keys import WatermarkKey

    scheme = create_scheme("upv", key=mpnet_key, delta=3.0)
    other = create_scheme(
        "upv",
        key=WatermarkKey(b"another-test-key-000000000000000", mpnet_key.embedder),
        epochs=30,
    )
    gens = scheme.generate_batch(PROMPTS, max_new_sentences=4, seed=0)
    for g in gens:
        d = scheme.detect(g.text)
        assert d.unit == "token" and (d.n_units < 40 or d.p_value < 0.01), (d, g.text)
    both = " ".join(g.text for g in gens)
    assert scheme.detect(both).p_value < 1e-4
    assert other.detect(both).p_value > 1e-3
    plain = create_scheme("unwatermarked").generate_batch(PROMPTS, max_new_sentences=4, seed=0)
    assert scheme.detect(" ".join(g.text for g in plain)).p_value > 1e-3
    with pytest.raises(EmptyTextError):
        scheme.detect("one")


@pytest.mark.slow
def test_upv_threshold_centres_reference_text(mpnet_key, smollm2) -> None:
    """The key's threshold puts the green share of the reference pairs at gamma."""
    from samark.schemes.upv import reference_pairs

    scheme = create_scheme("upv", key=mpnet_key, gamma=0.25)
    ref = reference_pairs(scheme.lm)  # type: ignore[attr-defined]
    share = float(scheme.is_green(ref).double().mean())  # type: ignore[attr-defined]
    assert abs(share - 0.25) < 0.01


@pytest.mark.slow
def test_unwatermarked_row_has_no_detector_and_works_without_pad_token(mpnet_key, smollm2) -> None:
    scheme = create_scheme("unwatermarked", key=mpnet_key)
    tok = smollm2.tokenizer
    saved = tok.pad_token
    tok.pad_token = None  # a model without a pad token: the engine pads nothing
    try:
        assert tok.pad_token_id is None
        gens = scheme.generate_batch(PROMPTS, max_new_sentences=2, seed=1)
    finally:
        tok.pad_token = saved
    assert all(g.text and len(g.sentences) <= 2 for g in gens)
    assert not scheme_info("unwatermarked").detectable
    with pytest.raises(SamarkError, match="no detector"):
        scheme.detect(gens[0].text)


@pytest.mark.slow
def test_reference_rows_write_past_the_models_own_end(smollm2) -> None:
    """A finished chat turn: the model's next token is its end of turn. Stopping there would
    leave the row with no text (a miss for the length alone); the protocol writes on."""
    finished = "<|im_start|>user\nSay OK.<|im_end|>\n<|im_start|>assistant\nOK."
    stopping = create_scheme("unwatermarked", stop_at_eos=True)
    (g,) = stopping.generate_batch([finished], max_new_sentences=3, seed=0)
    assert g.tokens_sampled == 1 and g.text == ""  # the end of turn, drawn first
    writing = create_scheme("unwatermarked")
    (g,) = writing.generate_batch([finished], max_new_sentences=3, seed=0)
    assert len(g.sentences) == 3 and "<|im" not in g.text
    # it stops once the third sentence is complete, well inside the token budget
    assert g.output_tokens <= g.tokens_sampled < 3 * writing.config.tokens_per_sentence  # type: ignore[attr-defined]


def test_scheme_revisions_enter_row_fingerprints() -> None:
    from samark.evaluation.experiment import SchemeSpec
    from samark.schemes.base import scheme_revision

    assert scheme_revision("kgw") >= 1 and scheme_revision("samark") == 0
    # revision 0 keeps the fingerprints of committed records; a revised scheme gets new ones
    import hashlib
    import json

    def old(name: str) -> str:
        return hashlib.sha256(json.dumps([name, {}], sort_keys=True).encode()).hexdigest()[:12]

    assert SchemeSpec("samark", "s").fingerprint == old("samark")
    assert SchemeSpec("kgw", "k").fingerprint != old("kgw")
    with pytest.raises(SamarkError, match="unknown scheme"):
        scheme_revision("kgw2")


def test_baseline_keys_derive_from_the_secret(mpnet_key) -> None:
    a = mpnet_key.derive_ints("kgw", 2)
    assert a == mpnet_key.derive_ints("kgw", 2)
    assert a != mpnet_key.derive_ints("synthid", 2)
    assert all(0 <= x < 2**62 for x in a)


def test_empty_continuation_is_no_sentence() -> None:
    assert first_sentence("", final=True) is None
    assert first_sentence("   ", final=True) is None


@pytest.mark.parametrize("name", ["unwatermarked", "kgw", "synthid", "unigram", "morphmark", "exp"])
def test_token_rows_sample_what_transformers_generate_samples(name, mpnet_key, smollm2) -> None:
    """Each token row stays exact to its reference: fed the same tokens, the candidate
    engine's next-token distribution (suppressed tokens, temperature, top-p, the watermark's
    processor) is that of transformers' ``generate`` at every step, up to float rounding
    (total variation below 1e-4; a wrong order of the processors moves whole tokens)."""
    import torch
    from transformers import GenerationConfig

    from samark.sampling.token_writing import WriteRequest, Writing

    scheme = create_scheme(name, key=mpnet_key if name != "unwatermarked" else None)
    c = scheme.config  # type: ignore[attr-defined]
    steps = 10
    ids = smollm2.encode_prefix(PROMPTS[1], steps)
    suppress = sorted({int(i) for i in smollm2.tokenizer.all_special_ids} | smollm2.eos_ids)
    reference = GenerationConfig(
        do_sample=True,
        temperature=c.temperature,
        top_p=c.top_p,
        top_k=0,
        max_new_tokens=steps,
        pad_token_id=smollm2.pad_id,
        eos_token_id=sorted(smollm2.eos_ids),
        suppress_tokens=suppress,
        watermarking_config=scheme.watermarking_config(),  # type: ignore[attr-defined]
        output_scores=True,
        return_dict_in_generate=True,
    )
    torch.manual_seed(0)
    with torch.inference_mode():
        out = smollm2.model.generate(input_ids=torch.tensor([ids]), generation_config=reference)
        tokens = out.sequences[0, len(ids) :].tolist()
        assert len(tokens) == steps
        request = WriteRequest(
            PROMPTS[1],
            steps,
            temperature=c.temperature,
            top_p=c.top_p,
            watermark=scheme.logits_processor(),  # type: ignore[attr-defined]
            suppress=tuple(suppress),
        )
        writing = Writing(request, ids, smollm2.decode)
        decoder = smollm2.decoder(ids, 1, steps)
        logits = decoder.logits
        for step, token in enumerate(tokens):
            ours = torch.softmax(writing.scores(logits), dim=-1)
            ref = torch.softmax(out.scores[step].float(), dim=-1)
            assert float((ours - ref).abs().sum()) < 1e-4, f"step {step}"
            writing.tokens.append(token)
            logits = decoder.step(torch.tensor([token]))
