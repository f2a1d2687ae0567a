"""Quality and detection metrics against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from samark.evaluation.detection_metrics import (
    auc,
    bootstrap_interval,
    evidence,
    rate_below,
    threshold_at_fpr,
    tpr_at_fpr,
)
from samark.evaluation.judge import parse_pairwise, parse_ranking
from samark.evaluation.text_metrics import distinct_2, four_gram_repeat, sentence_duplicates


def test_sentence_duplicates() -> None:
    # 4 sentences, "the cat sat." repeats once (case and spaces normalised) -> 25%
    text = "The cat sat. A dog ran. the cat sat. Birds fly."
    assert sentence_duplicates(text) == pytest.approx(25.0)
    assert sentence_duplicates("One. Two. Three.") == 0.0
    assert sentence_duplicates("") == 0.0  # zero denominator -> 0


def test_distinct_2() -> None:
    # a b a b a: bigrams ab ba ab ba -> 2 unique of 4
    assert distinct_2("a b a b a") == pytest.approx(0.5)
    assert distinct_2("A b a B") == pytest.approx(2 / 3)  # lowercased: ab ba ab
    assert distinct_2("word") == 0.0  # no bigram


def test_four_gram_repeat() -> None:
    # a b c d a b c d: 5 four-grams, unique abcd bcda cdab dabc -> 1 repeat -> 20%
    assert four_gram_repeat("a b c d a b c d") == pytest.approx(20.0)
    assert four_gram_repeat("a b c") == 0.0


def test_tpr_at_fpr_and_threshold() -> None:
    neg = np.arange(100, dtype=float)  # 0..99
    # at most 1% of negatives above t: t = 98 (only 99 is above)
    assert threshold_at_fpr(neg, 0.01) == 98.0
    pos = np.array([50.0, 98.0, 98.5, 120.0])
    assert tpr_at_fpr(neg, pos, 0.01) == pytest.approx(0.5)  # 98.5 and 120
    assert threshold_at_fpr(neg, 0.05) == 94.0
    assert tpr_at_fpr(neg, pos, 0.05) == pytest.approx(0.75)


def test_auc_counts_ties_as_half() -> None:
    neg = np.array([0.0, 1.0, 2.0])
    pos = np.array([1.0, 3.0])
    # pairs: (1 vs 0,1,2) = 1 + 0.5 + 0 ; (3 vs all) = 3  -> 4.5 / 6
    assert auc(neg, pos) == pytest.approx(0.75)
    assert auc(neg, np.array([])) != auc(neg, np.array([]))  # nan


def test_bootstrap_interval_brackets_the_estimate() -> None:
    rng = np.random.default_rng(0)
    neg, pos = rng.normal(0, 1, 300), rng.normal(1.5, 1, 100)
    lo, hi = bootstrap_interval(neg, pos, auc, samples=300)
    assert lo < auc(neg, pos) < hi
    assert hi - lo < 0.2


def test_evidence_orders_by_p_then_z() -> None:
    e = evidence([0.001, 0.001, 0.5, 1e-9], [3.0, 9.0, 50.0, 0.0])
    assert e[1] > e[0] > e[2]  # equal p: larger z wins; smaller p always wins
    assert e[3] > e[1]
    assert rate_below([0.001, 0.02, 0.5], 0.01) == pytest.approx(1 / 3)


def test_judge_parsers() -> None:
    assert parse_pairwise('Sure: {"winner": "B"}') == "B"
    assert parse_pairwise('{"winner": "Tie"}') == "tie"
    assert parse_pairwise("A is better") is None
    # SmolLM2-135M echoes the asked template: that names every verdict, so it is none
    echo = '{"winner": "A"} or {"winner": "B"} or {"winner": "tie"}\n\nThe first text...'
    assert parse_pairwise(echo) is None
    assert parse_pairwise('{"winner": "A"} ... so {"winner": "A"}') == "A"  # one verdict
    assert parse_ranking('["B", "A=C"]', 3) == [2.5, 1.0, 2.5]
    assert parse_ranking('["B", "A"]', 3) is None  # a label missing


@pytest.mark.slow
def test_local_judge_scores_verdicts_exactly_and_cancels_position(smollm2) -> None:
    import torch

    from samark.evaluation.chat import LocalChatModel, _template_ids
    from samark.evaluation.judge import _local_pairwise, pairwise_messages

    judge = LocalChatModel(smollm2.name)
    messages = pairwise_messages("c4", "The mayor said.", "It rained.", "Traffic was slow.")
    options = ("A", "tie game")  # options of different lengths: padded rows
    got = judge.option_logprobs([messages], prefix='{"winner": "', options=options)[0]
    tok = smollm2.tokenizer
    prefix = tok.encode('{"winner": "', add_special_tokens=False)
    context = _template_ids(tok, messages) + prefix
    for option, score in zip(options, got, strict=True):
        own = tok.encode('{"winner": "' + option, add_special_tokens=False)[len(prefix) :]
        full = context + own
        with torch.inference_mode():
            logp = torch.log_softmax(smollm2.model(torch.tensor([full])).logits.float(), -1)[0]
        expect = sum(float(logp[i - 1, full[i]]) for i in range(len(context), len(full)))
        assert score == pytest.approx(expect, abs=1e-3)  # the same as one unpadded pass
    # the same two texts in both orders: whatever position the model prefers, it cancels
    same = _local_pairwise(judge, "c4", "The mayor said.", "It rained.", "It rained.")
    assert same["pairwise"] == "tie" and len(same["positions"]) == 2
