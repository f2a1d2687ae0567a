"""samark's KGW and Unigram against MarkLLM 0.1.5's, on SmolLM2-135M's tokenizer.

MarkLLM is installed ``pip install --no-deps markllm==0.1.5`` (``.ci/run``; its pins
``openai==0.28`` and ``Pillow==9.4.0`` would replace samark's). Without it every test here
fails, saying so, on purpose: the cross-check is part of the suite, never skipped.

What is checked (docs/baselines.md):
- KGW: with MarkLLM's seeding (``seeding="markllm"``), its ``gamma``, repeats counted and a
  key that carries its ``hash_key``, samark's z is MarkLLM's to the last bit;
- Unigram: a key that carries a ``hash_key`` has MarkLLM's green list, bit for bit, and
  samark's green count is MarkLLM's over the text's distinct tokens;
- the known differences, pinned: transformers' seeding (samark's default) is not MarkLLM
  0.1.5's; samark scores a repeated (context, token) pair or token once, MarkLLM every time;
  samark's own Unigram list is a permutation's head, the reference's the inverse's;
- a reference key detects MarkLLM-marked text with samark, and MarkLLM detects samark's.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import torch

from samark.evaluation.markllm_offline import offline
from samark.keys import EmbedderIdentity, WatermarkKey
from samark.schemes import create_scheme
from samark.segment import split_sentences

try:
    with offline():
        from markllm.utils.transformers_config import TransformersConfig
        from markllm.watermark.kgw.kgw import KGW as MarkLLMKGW
        from markllm.watermark.unigram.unigram import Unigram as MarkLLMUnigram
    MISSING: ImportError | None = None
except ImportError as exc:  # every test here fails, never skips; the other files still run
    MISSING = exc


@pytest.fixture(autouse=True, scope="module")
def markllm_installed() -> None:
    if MISSING is not None:
        pytest.fail(
            "the MarkLLM cross-check needs MarkLLM 0.1.5: pip install --no-deps "
            f"markllm==0.1.5 (.ci/run installs it); import failed: {MISSING}"
        )


#: MarkLLM's (and transformers') default integer key
HASH_KEY = 15485863
VOCAB = 49152
UNIGRAM_JSON = {
    "algorithm_name": "Unigram",
    "gamma": 0.5,
    "delta": 2.0,
    "hash_key": HASH_KEY,
    "z_threshold": 4.0,
}
PROMPT = "The city council met on Monday to discuss the new budget for schools."
HUMAN = [
    "The river rose overnight and flooded the lower streets of the town. Shop owners moved "
    "their goods upstairs before dawn. By noon the water had started to fall, and volunteers "
    "arrived with pumps and sandbags from the neighbouring villages.",
    "The museum reopened on Saturday after two years of repairs to its roof. Visitors queued "
    "in the rain to see the restored paintings, and the director thanked the builders.",
    # repeats: the same (previous, token) pairs and the same tokens several times
    "The cat sat on the mat. The cat sat on the mat. The cat sat on the mat again, and then "
    "the cat sat on the mat once more.",
]


def reference_key(hash_key: int = HASH_KEY) -> WatermarkKey:
    return WatermarkKey(
        b"markllm-crosscheck-key-000000000",
        EmbedderIdentity("none", "0" * 64),
        hash_key=hash_key,
    )


@pytest.fixture(scope="module")
def markllm_config(smollm2) -> TransformersConfig:
    """MarkLLM's view of samark's generator: the same model and tokenizer objects, 60 new
    tokens sampled at samark's temperature."""
    return TransformersConfig(
        model=smollm2.model,
        tokenizer=smollm2.tokenizer,
        vocab_size=VOCAB,
        device="cpu",
        max_new_tokens=60,
        do_sample=True,
        temperature=0.7,
    )


@pytest.fixture(scope="module")
def markllm_kgw(markllm_config) -> MarkLLMKGW:
    return MarkLLMKGW(None, markllm_config)  # MarkLLM's shipped config/KGW.json


@pytest.fixture(scope="module")
def markllm_unigram(markllm_config) -> MarkLLMUnigram:
    return MarkLLMUnigram(None, markllm_config)


@pytest.fixture(scope="module")
def markllm_unigram_strong(markllm_config, tmp_path_factory) -> MarkLLMUnigram:
    """MarkLLM's Unigram at delta = 4 (its own config file format): at delta = 2 a
    60-token text of this low-entropy model is not reliably detectable by either side."""
    path = tmp_path_factory.mktemp("markllm") / "Unigram.json"
    path.write_text(json.dumps({**UNIGRAM_JSON, "delta": 4.0}))
    return MarkLLMUnigram(str(path), markllm_config)


def continuation(watermark, seed: int) -> str:
    """MarkLLM's watermarked text for ``PROMPT`` without the prompt (MarkLLM returns both)."""
    torch.manual_seed(seed)
    text = watermark.generate_watermarked_text(PROMPT)
    assert text.startswith(PROMPT)
    return str(text[len(PROMPT) :].strip())


@pytest.fixture(scope="module")
def kgw_marked(markllm_kgw) -> str:
    return continuation(markllm_kgw, 0)


def test_markllm_defaults_are_the_ones_matched(markllm_kgw, markllm_unigram) -> None:
    """The reference settings every check below assumes (a MarkLLM upgrade that changes
    them shows here first)."""
    c = markllm_kgw.config
    assert (c.gamma, c.delta, c.hash_key, c.z_threshold) == (0.5, 2.0, HASH_KEY, 4.0)
    assert (c.prefix_length, c.f_scheme, c.window_scheme) == (1, "time", "left")
    u = markllm_unigram.config
    assert (u.gamma, u.delta, u.hash_key, u.z_threshold) == (0.5, 2.0, HASH_KEY, 4.0)
    assert c.vocab_size == u.vocab_size == VOCAB


@pytest.mark.slow
def test_kgw_z_is_markllms_under_aligned_seeding(smollm2, markllm_kgw, kgw_marked) -> None:
    ours = create_scheme(
        "kgw", key=reference_key(), gamma=0.5, seeding="markllm", ignore_repeated_ngrams=False
    )
    for text in [*HUMAN, kgw_marked]:
        theirs = markllm_kgw.detect_watermark(text)
        d = ours.detect(text)
        assert d.z == theirs["score"], text  # the same float, not merely close
        ids = smollm2.tokenizer(text, add_special_tokens=False)["input_ids"]
        assert d.n_units == len(ids) - 1  # every token after the first, as MarkLLM
    assert markllm_kgw.detect_watermark(kgw_marked)["score"] > 2.5
    assert ours.detect(kgw_marked).p_value < 0.01


def test_kgw_z_is_markllms_for_a_key_whose_product_passes_int64(markllm_config, tmp_path) -> None:
    """A hash_key near 2**62: MarkLLM multiplies it by its prf entry as Python integers
    (the product passes 2**63 without wrapping); samark's seeding computes it the same way."""
    big = 2**62 + 12345
    path = tmp_path / "KGW.json"
    path.write_text(
        json.dumps(
            {
                "algorithm_name": "KGW",
                "gamma": 0.5,
                "delta": 2.0,
                "hash_key": big,
                "prefix_length": 1,
                "z_threshold": 4.0,
                "f_scheme": "time",
                "window_scheme": "left",
            }
        )
    )
    theirs = MarkLLMKGW(str(path), markllm_config)
    ours = create_scheme(
        "kgw", key=reference_key(big), gamma=0.5, seeding="markllm", ignore_repeated_ngrams=False
    )
    for text in HUMAN[:2]:
        assert ours.detect(text).z == theirs.detect_watermark(text)["score"]


@pytest.mark.slow
def test_kgw_known_differences_are_pinned(smollm2, markllm_kgw, kgw_marked) -> None:
    """samark's default seeding is transformers' (``hash_key * prev``), not MarkLLM 0.1.5's
    (``(hash_key * prf[prev]) mod V``): the same integer key gives other green lists, and
    MarkLLM's marked text reads as unmarked. By default samark scores a repeated (context,
    token) pair once; MarkLLM scores it every time."""
    transformers_seeding = create_scheme(
        "kgw", key=reference_key(), gamma=0.5, ignore_repeated_ngrams=False
    )
    d = transformers_seeding.detect(kgw_marked)
    assert d.z != markllm_kgw.detect_watermark(kgw_marked)["score"]
    assert d.p_value > 0.01
    repeats = HUMAN[2]
    once = create_scheme("kgw", key=reference_key(), gamma=0.5, seeding="markllm")
    every = create_scheme(
        "kgw", key=reference_key(), gamma=0.5, seeding="markllm", ignore_repeated_ngrams=False
    )
    ids = smollm2.tokenizer(repeats, add_special_tokens=False)["input_ids"]
    assert once.detect(repeats).n_units == len(set(itertools.pairwise(ids)))
    assert once.detect(repeats).n_units < every.detect(repeats).n_units == len(ids) - 1
    assert once.detect(repeats).z != markllm_kgw.detect_watermark(repeats)["score"]


def test_unigram_green_list_is_markllms(smollm2, markllm_unigram) -> None:
    ours = create_scheme("unigram", key=reference_key())
    green = ours.green_mask(VOCAB).numpy()
    assert np.array_equal(green, markllm_unigram.utils.mask)
    other = create_scheme("unigram", key=reference_key(HASH_KEY + 1)).green_mask(VOCAB).numpy()
    assert not np.array_equal(other, green)


def test_unigram_green_counts_are_markllms(smollm2, markllm_unigram) -> None:
    """samark's green count is MarkLLM's over the distinct tokens; MarkLLM also counts each
    repeat (its z then differs wherever a token repeats)."""
    ours = create_scheme("unigram", key=reference_key())
    for text in HUMAN:
        ids = smollm2.tokenizer(text, add_special_tokens=False)["input_ids"]
        z, flags = markllm_unigram.utils.score_sequence(torch.tensor(ids))
        colour = dict(zip(ids, flags, strict=True))
        d = ours.detect(text)
        assert d.score == sum(colour.values()) and d.n_units == len(colour)
        assert markllm_unigram.detect_watermark(text)["score"] == z
        if len(colour) < len(ids):  # repeats: MarkLLM counts them, samark does not
            assert sum(flags) != d.score or len(ids) != d.n_units
            assert z != d.z


def test_samarks_own_unigram_list_is_the_inverse_of_the_references() -> None:
    """With one seed, the reference's list (a shuffled mask) is the inverse permutation's
    head and samark's own (keys without a hash_key) the permutation's head: as lists they
    overlap by chance (about half), which is why samark keys never detected MarkLLM's
    Unigram text."""
    seed, k = 12345, VOCAB // 2
    perm = np.random.default_rng(seed).permutation(VOCAB)
    mask = np.zeros(VOCAB, dtype=bool)
    mask[:k] = True
    np.random.default_rng(seed).shuffle(mask)
    assert np.array_equal(mask, np.isin(np.arange(VOCAB), np.argsort(perm)[:k]))
    own = np.isin(np.arange(VOCAB), perm[:k])
    assert 0.48 < (own & mask).sum() / k < 0.52


@pytest.mark.slow
@pytest.mark.parametrize("name", ["kgw", "unigram"])
def test_a_reference_key_detects_markllms_text_and_markllm_detects_samarks(
    name, markllm_kgw, markllm_unigram_strong, kgw_marked
) -> None:
    """Both directions on the real generator: MarkLLM marks (KGW with its shipped config,
    Unigram at delta = 4), samark detects with a key that carries MarkLLM's hash_key; samark
    marks with that key and MarkLLM's settings, and MarkLLM's own detector finds it."""
    params = {"gamma": 0.5, "seeding": "markllm"} if name == "kgw" else {"delta": 4.0}
    ours = create_scheme(
        name, key=reference_key(), tokens_per_sentence=30, temperature=0.7, **params
    )
    theirs = markllm_kgw if name == "kgw" else markllm_unigram_strong
    marked = kgw_marked if name == "kgw" else continuation(markllm_unigram_strong, 0)
    assert ours.detect(marked).p_value < 0.01, marked
    assert (
        create_scheme(name, key=reference_key(HASH_KEY + 1), **params).detect(marked).p_value > 0.01
    )
    written = ours.generate_batch([PROMPT], max_new_sentences=2, seed=0)[0]
    assert written.output_tokens >= 30
    verdict = theirs.detect_watermark(written.text)
    assert verdict["score"] > 2.33, written.text  # MarkLLM's z: p < 0.01, one-sided
    unmarked = create_scheme("unwatermarked").generate_batch([PROMPT], max_new_sentences=2, seed=0)
    assert theirs.detect_watermark(unmarked[0].text)["score"] < verdict["score"]


@pytest.mark.slow
def test_markllms_detection_pipeline_runs_a_samark_scheme(
    smollm2, markllm_config, tmp_path
) -> None:
    """The adapter, registered in MarkLLM's AutoWatermark, through MarkLLM's own detection
    pipelines (with its WordDeletion editor) and both success-rate calculators."""
    import random

    with offline():
        from markllm.evaluation.dataset import BaseDataset
        from markllm.evaluation.pipelines.detection import (
            DetectionPipelineReturnType,
            UnWatermarkedTextDetectionPipeline,
            WatermarkedTextDetectionPipeline,
        )
        from markllm.evaluation.tools.success_rate_calculator import (
            DynamicThresholdSuccessRateCalculator,
            FundamentalSuccessRateCalculator,
        )
        from markllm.evaluation.tools.text_editor import WordDeletion
        from markllm.watermark.auto_watermark import AutoWatermark

    from samark.integrations.markllm import SamarkWatermark, register

    key = tmp_path / "samark.key"
    WatermarkKey(b"markllm-adapter-key-000000000000", EmbedderIdentity("none", "0" * 64)).save(key)
    register()
    params = {"delta": 4.0, "max_new_sentences": 3, "tokens_per_sentence": 30}
    wm = AutoWatermark.load(
        "samark",
        algorithm_config={"key": str(key), "scheme": "unigram", "params": params, "seed": 0},
        transformers_config=markllm_config,
    )
    assert isinstance(wm, SamarkWatermark) and wm.uses_given_model
    assert wm.scheme.lm.model is smollm2.model  # MarkLLM's model object, not a second copy
    dataset = BaseDataset()
    dataset.prompts = [PROMPT, "Scientists have found a new species of frog in Peru."]
    dataset.natural_texts = HUMAN[:2]
    full = DetectionPipelineReturnType.FULL
    random.seed(0)  # MarkLLM's editors draw from the global stream
    marked = WatermarkedTextDetectionPipeline(
        dataset, text_editor_list=[WordDeletion(ratio=0.1)], show_progress=False, return_type=full
    ).evaluate(wm)
    human = UnWatermarkedTextDetectionPipeline(
        dataset, text_source_mode="natural", show_progress=False, return_type=full
    ).evaluate(wm)
    for r in marked:
        assert r.edited_text != r.generated_or_retrieved_text  # the editor ran
        assert r.detect_result["score"] == pytest.approx(-np.log10(r.detect_result["p_value"]))
    scores = [r.detect_result["score"] for r in marked], [r.detect_result["score"] for r in human]
    dynamic = DynamicThresholdSuccessRateCalculator(labels=["TPR", "FPR"], rule="best")
    assert dynamic.calculate(*scores) == {"TPR": 1.0, "FPR": 0.0}
    flags = (
        [r.detect_result["is_watermarked"] for r in marked],
        [r.detect_result["is_watermarked"] for r in human],
    )
    assert all(wm.detect_watermark(r.generated_or_retrieved_text)["is_watermarked"] for r in marked)
    fundamental = FundamentalSuccessRateCalculator(labels=["TPR", "FPR"]).calculate(*flags)
    assert fundamental == {"TPR": sum(flags[0]) / len(flags[0]), "FPR": 0.0}
    written = marked[0].generated_or_retrieved_text
    data = wm.get_data_for_visualization(written)
    sentences = split_sentences(written)
    assert len(data.decoded_tokens) == len(data.highlight_values) == len(sentences)
    assert [t.strip() for t in data.decoded_tokens] == sentences  # one entry a sentence
    assert all(0.0 <= w <= 1.0 for w in data.weights)


@pytest.mark.slow  # importing MarkLLM's editors imports transformers' T5 and BERT classes
@pytest.mark.parametrize(
    ("name", "editor"),
    [("markllm-word-delete", "WordDeletion"), ("markllm-synonym", "SynonymSubstitution")],
)
def test_markllms_editors_are_attacks_of_the_harness(name, editor) -> None:
    """MarkLLM's own editors, registered as attacks: offline (WordNet from Debian, no
    download), seeded per text (the same text and seed give the same edit whatever ran
    before, and the global random stream is left as it was), and MarkLLM's edit exactly."""
    import random

    from samark.evaluation.attacks import create_attack

    attack = create_attack(name, ratio=0.3)
    text = HUMAN[0]
    random.seed(99)
    before = random.random()
    random.seed(99)
    edited = attack.apply_batch([text, text], seeds=[5, 6])
    assert random.random() == before  # the caller's stream untouched
    assert edited[0] != text and edited[0] != edited[1]
    assert attack.apply(text, seed=5) == edited[0]
    with offline():
        from markllm.evaluation.tools import text_editor

        theirs = getattr(text_editor, editor)(ratio=0.3)
    random.seed(5)
    assert theirs.edit(text) == edited[0]
    assert create_attack(name, ratio=0.0).apply(text, seed=5) == " ".join(text.split())
