"""Forgery attacks (issue 36): piggyback edits change the asked facts and little else;
token stealing learns the preferences its counts show; semantic stealing finds the
direction marked texts scatter along."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from samark.errors import SamarkError
from samark.evaluation.attacks import ATTACKS, create_attack
from samark.evaluation.attacks.piggyback import FALSE_CLAIMS, is_false_claim, piggyback
from samark.evaluation.attacks.semantic_stealing import stolen_direction, stolen_orthant
from samark.evaluation.attacks.token_stealing import StolenBias, StolenPreferences
from samark.evaluation.forgery import ForgeryOutcome, forgery_p_values, measure_forgery
from samark.segment import split_sentences

TEXT = (
    "The city council approved the new budget on Tuesday after a long debate. "
    "Several members said Anna Berg had raised concerns about rising costs for transport. "
    "The mayor said the plan would protect schools and hospitals in Oakdale. "
    "Critics argued that the spending was too high for a town of 12,000 people. "
    "The vote passed by a narrow margin of 7 to 5. "
    "Residents will see the changes from next spring."
)


def test_forgery_attacks_are_registered_as_forgeries() -> None:
    for name in ("piggyback", "token-stealing", "semantic-stealing"):
        assert ATTACKS.get(name).kind == "forgery"
    assert ATTACKS.get("shuffle").kind == "removal"


def test_piggyback_changes_the_asked_facts() -> None:
    out, edits = piggyback(TEXT, random.Random(3), negations=2, numbers=2, entities=1, insertions=2)
    assert (edits.negations, edits.numbers, edits.entity_swaps, edits.inserted) == (2, 2, 1, 2)
    assert edits.facts_changed == 7
    assert out.count(" not ") == TEXT.count(" not ") + 2
    numbers = re.findall(r"\d[\d,]*", out)
    assert len(numbers) == 3 and sorted(numbers) != sorted(["12,000", "7", "5"])
    # the two names changed places
    assert out.index("Oakdale") < out.index("Anna Berg")
    assert len(split_sentences(out)) == len(split_sentences(TEXT)) + 2
    # seeded, and another seed edits elsewhere
    attack = create_attack("piggyback", negations=2, numbers=2, entities=1, insertions=2)
    assert attack.apply(TEXT, seed=3) == attack.apply(TEXT, seed=3)
    assert {attack.apply(TEXT, seed=s) for s in range(6)} != {attack.apply(TEXT, seed=3)}


def test_piggyback_makes_no_edit_it_cannot_and_checks_its_counts() -> None:
    plain = "Birds sing in the trees. Rivers run to the sea."
    out, edits = piggyback(
        plain, random.Random(0), negations=3, numbers=3, entities=1, insertions=0
    )
    assert out == plain and edits.facts_changed == 0
    with pytest.raises(SamarkError):
        create_attack("piggyback", negations=-1)
    with pytest.raises(SamarkError):
        create_attack("piggyback", insertions=1.5)


@pytest.mark.slow  # loads MiniLM: over the fast tier's limit on a busy machine
def test_piggyback_keeps_what_an_embedder_sees() -> None:
    """The attack's premise, measured: many facts changed, the sentences still aligned."""
    from samark.embed import load_embedder
    from samark.evaluation.fidelity import measure

    out, edits = piggyback(TEXT, random.Random(1), negations=3, numbers=2, entities=1, insertions=0)
    assert edits.facts_changed >= 5
    (fid,) = measure(load_embedder("all-minilm-l6-v2"), [TEXT], [out])
    # 5 facts in 6 sentences: every sentence still has its counterpart (measured 0.80)
    assert fid.aligned_similarity > 0.75
    assert fid.similarity > 0.95 and fid.word_overlap > 0.9


def test_stolen_preferences_learn_a_context_and_a_token() -> None:
    # in "marked" text token 7 always follows token 3 and token 9 is common; in base text
    # every token is equally likely after every other
    rng = np.random.default_rng(0)
    base = [list(rng.integers(0, 20, 400)) for _ in range(5)]
    marked = []
    for _ in range(5):
        ids = list(rng.integers(0, 20, 400))
        ids = [9 if x in (10, 11) else x for x in ids]
        marked.append([t for x in ids for t in ((x, 7) if x == 3 else (x,))])
    stolen = StolenPreferences(marked, base, 20, context=1, cap=2.0, min_count=2)
    after_3 = stolen.scores([5, 3])
    assert after_3[7] == pytest.approx(1.0)  # 20x as likely after 3: capped at 1
    assert stolen.context_free[9] > 0.9  # about 3x as frequent
    assert stolen.context_free[10] == 0 and stolen.context_free[11] == 0  # never seen
    assert stolen.scores([5, 4])[7] < after_3[7]  # no context evidence for 7 after 4
    # the bias adds delta x the scores to each row's logits, per row context
    import torch

    bias = StolenBias(stolen, 4.0)
    scores = torch.zeros(2, 20)
    out = bias(torch.tensor([[1, 3], [1, 4]]), scores)
    assert out[0, 7] == pytest.approx(4.0)
    assert out[1, 7] < out[0, 7]
    with pytest.raises(SamarkError):
        StolenPreferences(marked, base, 20, cap=1.0)


def test_token_stealing_needs_unmarked_text_and_enough_marked() -> None:
    with pytest.raises(SamarkError, match="unmarked"):
        create_attack("token-stealing", marked=["a b c"], unmarked=[])
    with pytest.raises(SamarkError, match="n = 5"):
        create_attack("token-stealing", marked=["a b c"], unmarked=["d e f"], n=5)


def test_stolen_direction_finds_the_plane_marked_texts_scatter_along() -> None:
    rng = np.random.default_rng(1)
    dim = 64
    pivot = rng.standard_normal(dim)
    pivot /= np.linalg.norm(pivot)
    human = rng.standard_normal((300, dim)) * 0.1
    signs = rng.choice([-1.0, 1.0], 40)
    marked = rng.standard_normal((40, dim)) * 0.1 + 0.3 * signs[:, None] * pivot
    d = stolen_direction(marked, human)
    assert abs(d @ pivot) > 0.9
    random_cos = abs(stolen_direction(rng.standard_normal((40, dim)) * 0.1, human) @ pivot)
    assert random_cos < 0.6


def test_stolen_orthant_aims_between_two_pivots() -> None:
    rng = np.random.default_rng(4)
    dim = 64
    p1, p2 = np.linalg.qr(rng.standard_normal((dim, 2)))[0].T
    human = rng.standard_normal((300, dim)) * 0.05
    s1, s2 = rng.choice([-1.0, 1.0], (2, 60))
    marked = rng.standard_normal((60, dim)) * 0.05 + 0.3 * (s1[:, None] * p1 + s2[:, None] * p2)
    d = stolen_orthant(marked, human)
    # both pivots' signs agree along d: it points at an orthant's centre, not an axis
    assert min(abs(d @ p1), abs(d @ p2)) > 0.6
    along = stolen_direction(marked, human)
    assert abs(along @ p1) ** 2 + abs(along @ p2) ** 2 > 0.9  # in the plane, any angle


def test_semantic_stealing_fills_an_orthant_from_the_pool() -> None:
    pool = [
        ["Cats purr softly.", "Dogs bark at night.", "Parliament passed the bill."],
        ["Stocks fell on Monday.", "The striker scored twice.", "Rain is expected."],
        ["A new vaccine was approved.", "The river flooded the town.", "He sang a song."],
    ]
    from samark.embed import load_embedder

    embedder = load_embedder("all-minilm-l6-v2")
    vectors = embedder.encode([s for text in pool for s in text])
    marked = ["Stocks fell on Monday. Markets slid.", "The striker scored. Fans cheered."]
    attack = create_attack(
        "semantic-stealing",
        marked=marked,
        embedder="all-minilm-l6-v2",
        pool_sentences=pool,
        pool_vectors=vectors,
        spread=1,
    )
    out = attack.apply("One. Two. Three.", seed=0)
    got = split_sentences(out)
    assert len(got) == 3 and set(got) <= {s for text in pool for s in text}
    # spread 1: the three sentences farthest along one side of the stolen direction
    proj = vectors @ attack.direction
    flat = [s for text in pool for s in text]
    sides = [set(np.array(flat)[np.argsort(-proj)[:3]]), set(np.array(flat)[np.argsort(proj)[:3]])]
    assert set(got) in sides
    with pytest.raises(SamarkError):
        create_attack("semantic-stealing", marked=marked[:1], embedder="all-minilm-l6-v2")


@pytest.mark.slow  # loads SmolLM2 and writes two short texts
def test_token_stealing_writes_seeded_text_leaning_to_what_it_learned() -> None:
    marked = [TEXT, TEXT.replace("council", "committee")]
    unmarked = ["A reporter watched the meeting. Nobody left early. The room was warm."]
    attack = create_attack(
        "token-stealing", marked=marked, unmarked=unmarked, sentences=2, delta=8.0
    )
    assert attack.n == 2 and attack.stolen.marked_tokens > 50
    prompt = "The city council met on Monday."
    out = attack.apply(prompt, seed=5)
    assert 1 <= len(split_sentences(out)) <= 2
    assert attack.apply(prompt, seed=5) == out  # seeded
    # a strong bias toward the marked texts' tokens: most of what it writes is among them
    tok = attack.lm.tokenizer
    learned = set(np.flatnonzero(attack.stolen.context_free > 0).tolist())
    ids = tok(out, add_special_tokens=False)["input_ids"]
    assert sum(t in learned for t in ids) / len(ids) > 0.5


def test_semantic_stealing_with_its_own_unmarked_texts_sees_past_the_domain() -> None:
    """Generated text differs from the human pool along a direction of its own (style,
    topic); against the pool that difference hides the mark's plane, against unmarked
    texts the forger wrote itself it cancels. Given embeddings, nothing is loaded."""
    rng = np.random.default_rng(2)
    dim, sentences = 48, 6
    pivot, domain = np.linalg.qr(rng.standard_normal((dim, 2)))[0].T

    def texts(count: int, shift: np.ndarray, marked: bool) -> list[np.ndarray]:
        out = []
        for _ in range(count):
            lean = rng.choice([-1.0, 1.0]) * 0.15 * pivot if marked else 0.0
            topic = rng.standard_normal(dim) * 0.03 + shift * rng.standard_normal() * 0.4
            out.append(topic + lean + rng.standard_normal((sentences, dim)) * 0.05)
        return out

    pool = texts(200, np.zeros(dim), marked=False)  # human texts: no domain spread
    marked = texts(300, domain, marked=True)
    unmarked = texts(300, domain, marked=False)
    common = {
        "embedder": "no-such-embedder",  # never loaded: every embedding is given
        "pool_sentences": [["s"] * sentences for _ in pool],
        "pool_vectors": np.concatenate(pool),
        "marked_vectors": marked,
    }
    against_pool = create_attack("semantic-stealing", **common)
    own = create_attack("semantic-stealing", unmarked_vectors=unmarked, **common)
    assert against_pool.reference == "pool" and own.reference == "unmarked"
    assert abs(against_pool.direction @ domain) > 0.9  # the domain's spread, not the mark
    assert abs(own.direction @ pivot) > 0.9
    with pytest.raises(SamarkError, match="at least 2"):
        create_attack("semantic-stealing", unmarked_vectors=unmarked[:1], **common)
    chosen = own.forgery_indices(4, random.Random(0))
    assert len(set(chosen)) == 4 and all(0 <= c < len(common["pool_vectors"]) for c in chosen)


def test_is_false_claim_tells_the_piggybacks_own_sentences() -> None:
    out, edits = piggyback(TEXT, random.Random(3), negations=0, numbers=0, entities=0, insertions=3)
    inserted = [s for s in split_sentences(out) if is_false_claim(s)]
    assert len(inserted) == edits.inserted == 3
    assert not any(is_false_claim(s) for s in split_sentences(TEXT))
    assert is_false_claim(FALSE_CLAIMS[0].format(name="Anna Berg"))


def test_forgery_outcome_counts_detections_below_alpha() -> None:
    outcome = ForgeryOutcome.of([0.001, 0.5, 0.009, 1.0], alpha=0.01)
    assert (outcome.forgeries, outcome.detected, outcome.median_p) == (4, 0.5, 0.2545)
    assert forgery_p_values([None]) == [1.0]  # nothing to score: not detected
    with pytest.raises(SamarkError):  # a removal attack's detections are no forger's success
        measure_forgery(None, create_attack("shuffle"), [TEXT])  # type: ignore[arg-type]
