"""One step of SAMark's candidate selection (paper Alg. 1, lines 5-12), as pure functions.

Order, as in the paper: n-gram overlap filter vs. the context, semantic-similarity filter vs.
the sentences chosen so far, channel-sign match against the flags R, then the score
``S = sum_j tanh(kappa r_j cos_j) + lambda_div D + lambda_nov N`` and a softmax pick.

When no candidate survives, :func:`select` falls back (documented in docs/parameters.md):
the caller first draws extra batches; if the pool still has no match, the best-scoring
candidate that passes the hard filters is taken ("unmatched"); if none passes them, the
best-scoring complete candidate ("unfiltered").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from samark.text import ngrams, words

# fallback kinds, in the order they are tried
MATCHED = "matched"
UNMATCHED = "unmatched"
UNFILTERED = "unfiltered"

#: what a channel's margin is measured from in the selection score: zero (the paper) or the
#: step's pool mean (docs/parameters.md, "Margin from the pool")
MarginReference = Literal["zero", "pool"]
MARGIN_REFERENCES: tuple[str, ...] = ("zero", "pool")


def ngram_overlap(candidate: str, context_ngrams: set[tuple[str, ...]], n: int) -> float:
    """rho_ngram: the share of the candidate's distinct n-grams already in the context.

    A candidate with fewer than n words has no n-gram and overlap 0.
    """
    grams = set(ngrams(words(candidate), n))
    if not grams:
        return 0.0
    return len(grams & context_ngrams) / len(grams)


def semantic_similarity(candidates: np.ndarray, history: np.ndarray) -> np.ndarray:
    """rho_sem: each candidate's largest cosine to a chosen sentence (0 with no history)."""
    if history.shape[0] == 0:
        return np.zeros(candidates.shape[0])
    return (candidates @ history.T).max(axis=1)


def vocabulary_novelty(candidate: str, vocabulary: set[str]) -> float:
    """N(x): the share of the candidate's distinct words not yet in the text (0 if no word)."""
    vocab = set(words(candidate))
    if not vocab:
        return 0.0
    return len(vocab - vocabulary) / len(vocab)


def channel_match(cosines: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """Whether every channel's cosine sign equals the flag, shape (m,)."""
    return np.all(np.sign(cosines) == flags[None, :], axis=1)


def watermark_score(
    cosines: np.ndarray,
    flags: np.ndarray,
    kappa: float,
    use_tanh: bool,
    reference: np.ndarray | None = None,
) -> np.ndarray:
    """S_wm = sum_j tanh(kappa (r_j cos_j - ref_j)) (or without tanh), shape (m,).

    ``reference`` (c,) is the flag-signed cosine each channel's margin is measured from:
    ``None`` is zero, the paper's score.
    """
    signed = cosines * flags[None, :]
    if reference is not None:
        signed = signed - reference[None, :]
    return (np.tanh(kappa * signed) if use_tanh else signed).sum(axis=1)


def pool_reference(cosines: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """The pool's mean flag-signed cosine per channel, shape (c,): the reference of the
    "pool" margin (``SAMarkConfig.margin_reference``)."""
    return (cosines * flags[None, :]).mean(axis=0)


def saturated_matches(
    cosines: np.ndarray, flags: np.ndarray, kappa: float, level: float, matched: np.ndarray
) -> np.ndarray:
    """Matched candidates whose every channel term tanh(kappa r_j cos_j) is >= ``level``
    (strong matches: the adaptive budget's stop rule), shape (m,)."""
    return matched & np.all(np.tanh(kappa * cosines * flags[None, :]) >= level, axis=1)


def softmax_weights(scores: np.ndarray, epsilon: float) -> np.ndarray:
    """The pick's law: q_i = exp(eps * S_i) / sum exp(eps * S)."""
    logits = epsilon * (scores - scores.max())
    q = np.exp(logits)
    q /= q.sum()
    return q


def softmax_pick(
    scores: np.ndarray, epsilon: float, rng: np.random.Generator
) -> tuple[int, np.ndarray]:
    """Sample an index with probability exp(eps * S) / sum exp(eps * S); returns (index, q)."""
    q = softmax_weights(scores, epsilon)
    return int(rng.choice(len(q), p=q)), q


@dataclass(frozen=True)
class StepChoice:
    """The outcome of one selection step."""

    index: int  # into the candidate list
    kind: str  # MATCHED, UNMATCHED or UNFILTERED
    score: float
    n_candidates: int
    n_ngram_pass: int
    n_semantic_pass: int
    n_matched: int
    #: matched candidates whose every channel term tanh(kappa r_j cos_j) >= ``saturation``
    n_saturated: int = 0
    #: (S_wm, D, N) of every matched candidate, for studying epsilon offline
    matched_terms: tuple[tuple[float, float, float], ...] = ()


@dataclass(frozen=True)
class SelectionRule:
    """How one step chooses among its candidates (paper Alg. 1's score and filters):
    :attr:`SAMarkConfig.selection_rule <samark.schemes.samark.config.SAMarkConfig.selection_rule>`
    builds it from a config, so that :func:`select` takes one rule, not a dozen numbers."""

    kappa: float
    epsilon: float
    lambda_div: float
    lambda_nov: float
    theta_sem: float
    theta_ngram: float
    ngram_n: int
    ngram_filter: bool = True
    semantic_filter: bool = True
    use_tanh: bool = True
    #: only feeds ``StepChoice.n_saturated`` (the adaptive budget's stop rule)
    saturation: float = 0.3
    margin_reference: MarginReference = "zero"


def select(
    candidates: list[str],
    embeddings: np.ndarray,
    pivots: np.ndarray | None,
    flags: np.ndarray | None,
    context_ngrams: set[tuple[str, ...]],
    vocabulary: set[str],
    history: np.ndarray,
    rule: SelectionRule,
    *,
    signed: np.ndarray | None = None,
    stay: np.ndarray | None = None,
    rng: np.random.Generator,
) -> StepChoice:
    """Choose the next sentence among complete ``candidates`` (non-empty).

    The watermark terms read each candidate's cosines to ``pivots`` signed by ``flags``;
    ``signed`` (m, c) gives those flag-signed cosines directly instead (keyed cells: each
    candidate scored on its own cell's pivots), and ``pivots`` and ``flags`` are unused.

    ``saturation`` only feeds the ``n_saturated`` count (the adaptive budget's stop rule).
    ``margin_reference`` "pool" measures each channel's margin from the mean of all
    ``candidates`` instead of from zero (the match rule is unchanged). ``stay`` (m,), each
    candidate's chance of staying in its cell under paraphrase, weighs its watermark
    score (``SAMarkConfig.cell_margin_sd``).
    """
    m = len(candidates)
    if m == 0:
        raise ValueError("select() needs at least one candidate")
    ngram_ok = np.ones(m, dtype=bool)
    if rule.ngram_filter:
        ngram_ok = np.array(
            [ngram_overlap(c, context_ngrams, rule.ngram_n) < rule.theta_ngram for c in candidates]
        )
    rho_sem = semantic_similarity(embeddings, history)
    sem_ok = rho_sem < rule.theta_sem if rule.semantic_filter else np.ones(m, dtype=bool)
    hard_ok = ngram_ok & sem_ok
    if signed is not None:
        cosines, flags = signed, np.ones(signed.shape[1])
    else:
        if pivots is None or flags is None:
            raise ValueError("select() needs pivots and flags, or signed cosines")
        cosines = embeddings @ pivots.T
    matched = hard_ok & channel_match(cosines, flags)

    diversity = 1.0 - rho_sem
    novelty = np.array([vocabulary_novelty(c, vocabulary) for c in candidates])
    reference = pool_reference(cosines, flags) if rule.margin_reference == "pool" else None
    s_wm = watermark_score(cosines, flags, rule.kappa, rule.use_tanh, reference)
    if stay is not None:
        s_wm = s_wm * stay
    score = s_wm + rule.lambda_div * diversity + rule.lambda_nov * novelty
    counts = dict(
        n_candidates=m,
        n_ngram_pass=int(ngram_ok.sum()),
        n_semantic_pass=int((ngram_ok & sem_ok).sum()),
        n_matched=int(matched.sum()),
        n_saturated=int(
            saturated_matches(cosines, flags, rule.kappa, rule.saturation, matched).sum()
        ),
    )
    if matched.any():
        pool = np.flatnonzero(matched)
        pick, _ = softmax_pick(score[pool], rule.epsilon, rng)
        index, kind = int(pool[pick]), MATCHED
    else:
        pool = np.flatnonzero(hard_ok) if hard_ok.any() else np.arange(m)
        index = int(pool[np.argmax(score[pool])])
        kind = UNMATCHED if hard_ok.any() else UNFILTERED
    terms = tuple(
        (float(s_wm[i]), float(diversity[i]), float(novelty[i])) for i in np.flatnonzero(matched)
    )
    return StepChoice(
        index=index, kind=kind, score=float(score[index]), matched_terms=terms, **counts
    )


class _Encoder(Protocol):
    def encode(self, sentences: list[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class PartialScore:
    """The pruned budget's row score (``SAMarkResearch.prune_at``): a live candidate's first
    ``at`` tokens, embedded like a sentence, scored by ``S_wm`` against the step's pivots
    and flags. The engine keeps the ``keep`` best rows (a :class:`RowPruner`)."""

    at: int
    keep: int
    embedder: _Encoder
    pivots: np.ndarray
    flags: np.ndarray
    kappa: float

    def score(self, partial_texts: list[str]) -> np.ndarray:
        emb = self.embedder.encode([t.strip() or "." for t in partial_texts])
        return watermark_score(emb @ self.pivots.T, self.flags, self.kappa, True)
