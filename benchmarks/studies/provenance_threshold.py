"""Calibrate the provenance record's paraphrase threshold on human sentences.

A checked sentence is called a paraphrase of a served one when its embedding's cosine
with the nearest stored embedding reaches a threshold. A false match is a human sentence
that was never served, yet lands that close to a stored sentence of another document.
This measures how often that happens and picks the threshold for a target per-sentence
false-match rate against a store of a given size:

1. Human sentences (at least ``MIN_WORDS`` words) of six corpora (news, encyclopedia,
   fiction, a technical handbook, newswire, fortunes; ``CORPORA``); documents split at
   random into halves A and B. A sentence never counts against its own document; pairs
   with equal normal forms are left out (the keyed hash calls those served, whatever
   the cosine), and so are copies: pairs sharing at least ``COPY_JACCARD`` of their
   words (wire copies, quotes, templates), which a record should match.
2. In each half, every sentence is checked against a store of ``--store-size``
   sentences drawn from the half's other documents (four draws, one per quarter of the
   sentences); the half picks the smallest threshold whose share of nearest cosines at
   or above it is within ``--target``.
3. Each half's pick is measured on the other half (held out); the threshold is the
   larger pick. Printed with it: the false-match rate by threshold with copies left
   out and counted, and, for larger stores, the union bound ``M * p(t)`` from the rate
   ``p(t)`` of pairs of different documents at or above t (an upper bound that needs no
   independence, loose where false matches come in clusters).

    OMP_NUM_THREADS=1 python -m benchmarks.studies.provenance_threshold \
        --embedder all-mpnet-base-v2 --store-size 5000 --target 1e-3

Embeddings are cached under ``~/.cache/samark/research/provenance/<embedder>/`` (the
tests' stored all-mpnet-base-v2 vectors are reused where the sentences match); the first
run embeds 12,776 sentences: about 4 minutes with all-MiniLM-L6-v2 and 15 with
all-mpnet-base-v2 on one busy core. The figures are in samark.provenance.threshold and
docs/provenance.md.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.human_texts import embed_sentence_lists
from samark.datasets import load_dataset
from samark.embed import Embedder, load_embedder
from samark.provenance.normalise import normalise
from samark.segment import split_sentences

#: corpus -> (documents, sentences per document from its start)
CORPORA: dict[str, tuple[int, int]] = {
    "cnn_dailymail": (200, 25),
    "wikipedia_leads": (300, 10),
    "jane_austen": (200, 10),
    "debian_handbook": (300, 10),
    "reuters": (70, 25),
    "fortunes": (600, 10),
}
CACHE = Path.home() / ".cache" / "samark" / "research" / "provenance"
#: sentences of fewer words are left out (headings, "Yes.", chapter numbers): the
#: record matches those verbatim only (samark.provenance.threshold.MIN_WORDS)
MIN_WORDS = 4
#: a pair sharing this share of its words (Jaccard) is a copy, not independent text
COPY_JACCARD = 0.5
#: pairs below this cosine are never checked for copying (none reaches a threshold)
CANDIDATE = 0.6
_WORD = re.compile(r"\w+")


def corpus_documents(name: str, docs: int, sentences: int) -> list[list[str]]:
    """The first ``sentences`` sentences (of at least ``MIN_WORDS`` words) of the
    corpus's first ``docs`` documents that have any."""
    out: list[list[str]] = []
    for doc in load_dataset(name):
        if len(out) == docs:
            break
        kept = [s for s in split_sentences(doc.text) if len(s.split()) >= MIN_WORDS]
        if kept:
            out.append(kept[:sentences])
    return out


def known_vectors(embedder: Embedder) -> dict[str, np.ndarray]:
    """The tests' stored vectors of this embedder (tests/data), by sentence."""
    from scripts.build_test_embeddings import CORPORA as STORED
    from scripts.build_test_embeddings import corpus_texts, stored_embeddings

    known: dict[str, np.ndarray] = {}
    for name, limit in STORED.items():
        texts = corpus_texts(name, limit)
        flat = stored_embeddings(embedder.identity.fingerprint, name, texts)
        if flat is not None:
            known.update(zip([s for t in texts for s in t], flat, strict=True))
    return known


def load_corpora(embedder: Embedder) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(sentences, their document numbers, unit embeddings float32) of every corpus."""
    sentences: list[str] = []
    doc_ids: list[int] = []
    parts: list[np.ndarray] = []
    with embedder.remembering(known_vectors(embedder)):
        for name, (docs, per_doc) in CORPORA.items():
            texts = corpus_documents(name, docs, per_doc)
            cache = CACHE / embedder.name / f"{name}.npz"
            vectors = embed_sentence_lists(embedder, texts, cache)
            for text, vecs in zip(texts, vectors, strict=True):
                doc_ids += [len(parts)] * len(text)
                sentences += text
                parts.append(vecs)
            print(f"{name}: {len(texts)} documents, {sum(map(len, texts))} sentences", flush=True)
    emb = np.concatenate(parts).astype(np.float32)
    return sentences, np.asarray(doc_ids), emb


@dataclass(frozen=True)
class Corpus:
    """Sentences, their documents, normal forms (as ids), word sets and embeddings."""

    sentences: list[str]
    docs: np.ndarray
    forms: np.ndarray
    words: list[frozenset[str]]
    emb: np.ndarray

    @classmethod
    def of(cls, sentences: list[str], docs: np.ndarray, emb: np.ndarray) -> Corpus:
        normal = [normalise(s) for s in sentences]
        return cls(
            sentences,
            docs,
            np.unique(normal, return_inverse=True)[1],
            [frozenset(_WORD.findall(n)) for n in normal],
            emb,
        )

    def is_copy(self, i: int, j: int) -> bool:
        """Whether sentences i and j share at least ``COPY_JACCARD`` of their words: one
        copies the other with small edits (wire copy, a quote), not independent text."""
        a, b = self.words[i], self.words[j]
        return len(a & b) >= COPY_JACCARD * max(1, len(a | b))


def _masked(corpus: Corpus, rows: np.ndarray, cols: np.ndarray, copies: bool) -> np.ndarray:
    """Cosines of ``rows`` x ``cols``, -1 where a pair is of one document or of equal
    normal forms, and (unless ``copies``) where it is a copy."""
    block = corpus.emb[rows] @ corpus.emb[cols].T
    block[corpus.docs[rows, None] == corpus.docs[None, cols]] = -1.0
    block[corpus.forms[rows, None] == corpus.forms[None, cols]] = -1.0
    if not copies:
        for r, c in zip(*np.nonzero(block >= CANDIDATE), strict=True):
            if corpus.is_copy(int(rows[r]), int(cols[c])):
                block[r, c] = -1.0
    return block


def pair_exceedances(corpus: Corpus, grid: np.ndarray, *, copies: bool) -> tuple[np.ndarray, int]:
    """Counts of pairs (i < j of different documents and normal forms; copies left out
    unless ``copies``) with cosine >= each grid value, and the number of pairs."""
    counts = np.zeros(len(grid), dtype=np.int64)
    pairs = 0
    n = len(corpus.emb)
    every = np.arange(n)
    for start in range(0, n, 1024):
        rows = every[start : start + 1024]
        block = _masked(corpus, rows, every, copies)
        upper = rows[:, None] < every[None, :]
        valid = upper & (block > -1.0)
        values = np.sort(block[valid])
        pairs += values.size
        counts += values.size - np.searchsorted(values, grid, side="left")
    return counts, pairs


@dataclass
class Nearest:
    """Each checked sentence's nearest cosine in its store (copies left out, and with
    them), and how many had a verbatim twin or a copy there."""

    independent: np.ndarray
    with_copies: np.ndarray
    twins: int
    copies: int
    store: int


def nearest_cosines(
    corpus: Corpus, idx: np.ndarray, size: int, rng: np.random.Generator
) -> Nearest:
    """Each sentence of ``idx`` against a store of ``size`` sentences of ``idx`` drawn at
    random from the other three quarters (its own document never counts)."""
    independent, with_copies = [], []
    twins = copies = used = 0
    for part in np.array_split(rng.permutation(idx), 4):
        others = np.setdiff1d(idx, part)
        store = rng.choice(others, size=min(size, len(others)), replace=False)
        for start in range(0, len(part), 1024):
            rows = part[start : start + 1024]
            all_pairs = _masked(corpus, rows, store, copies=True)
            no_copies = _masked(corpus, rows, store, copies=False)
            independent.append(no_copies.max(axis=1))
            with_copies.append(all_pairs.max(axis=1))
            twin = (corpus.forms[rows, None] == corpus.forms[None, store]) & (
                corpus.docs[rows, None] != corpus.docs[None, store]
            )
            twins += int(twin.any(axis=1).sum())
            copies += int(((all_pairs > no_copies) & (all_pairs > -1)).any(axis=1).sum())
        used = len(store)
    return Nearest(np.concatenate(independent), np.concatenate(with_copies), twins, copies, used)


def pick_threshold(best: np.ndarray, grid: np.ndarray, target: float) -> float:
    """The smallest grid threshold at which the share of nearest cosines at or above it
    is within ``target``."""
    share = np.array([(best >= t).mean() for t in grid])
    return float(grid[np.argmax(share <= target)]) if (share <= target).any() else 1.0


def describe(best: np.ndarray) -> str:
    return (
        f"median {np.median(best):.3f}, 99th percentile {np.quantile(best, 0.99):.3f}, "
        f"99.9th {np.quantile(best, 0.999):.3f}, max {best.max():.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedder", default="all-mpnet-base-v2")
    parser.add_argument("--store-size", type=int, default=5_000)
    parser.add_argument("--target", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    corpus = Corpus.of(*load_corpora(load_embedder(args.embedder)))
    rng = np.random.default_rng(args.seed)
    doc_list = np.unique(corpus.docs)
    in_a = np.isin(corpus.docs, rng.permutation(doc_list)[: len(doc_list) // 2])
    halves = {"A": np.flatnonzero(in_a), "B": np.flatnonzero(~in_a)}
    print(
        f"{args.embedder}: {len(corpus.sentences)} sentences of {len(doc_list)} documents; "
        f"half A {len(halves['A'])}, half B {len(halves['B'])}"
    )

    # each half: every sentence's nearest cosine in a store of --store-size sentences of
    # other documents of the same half; each half picks a threshold for the target
    grid = np.round(np.arange(0.50, 1.0001, 0.005), 3)
    found: dict[str, Nearest] = {}
    picks: dict[str, float] = {}
    for name, idx in halves.items():
        near = found[name] = nearest_cosines(corpus, idx, args.store_size, rng)
        picks[name] = pick_threshold(near.independent, grid, args.target)
        n = len(near.independent)
        print(
            f"\nhalf {name}: {n} sentences, each against {near.store:,} stored sentences of "
            f"other documents\n  verbatim twins (equal normal form: the hash calls them "
            f"served): {near.twins} of {n}; copies (>= {COPY_JACCARD:.0%} of words shared): "
            f"{near.copies}\n  nearest cosine, copies left out: {describe(near.independent)}"
            f"\n  nearest cosine, copies counted: {describe(near.with_copies)}\n  its pick "
            f"for a false-match rate <= {args.target:g}: t = {picks[name]:.3f}"
        )
    print()
    for name, other in (("A", "B"), ("B", "A")):
        best = found[other].independent
        k, n = int((best >= picks[name]).sum()), len(best)
        print(
            f"half {name}'s pick t = {picks[name]:.3f} on half {other} (held out): {k} of "
            f"{n} = {k / n:.2g} false matches (95% upper bound {_upper_95(k, n):.2g})"
        )
    threshold = max(picks.values())
    for label, key in (("copies left out", "independent"), ("copies counted", "with_copies")):
        pooled = np.concatenate([getattr(near, key) for near in found.values()])
        n = len(pooled)
        rates = ", ".join(
            f"{t:.2f}: {(pooled >= t).mean():.2g}" for t in (0.80, 0.85, 0.90, threshold)
        )
        k = int((pooled >= threshold).sum())
        print(
            f"false matches per sentence against a store of {args.store_size:,}, {label}: "
            f"at t = {threshold:.3f} {k} of {n} = {k / n:.2g} (95% upper bound "
            f"{_upper_95(k, n):.2g}); by threshold {rates}"
        )
    print(f"\nthreshold (the larger pick): t = {threshold:.3f}")

    # larger stores: the union bound M * p(t) from the rate of pairs of different
    # documents at or above the threshold (loose where false matches come in clusters)
    counts, pairs = pair_exceedances(corpus, grid, copies=False)
    at = int(np.argmax(grid >= threshold))
    rate = counts[at] / pairs
    print(
        f"pairs of different documents (copies left out): {pairs:,}; at or above "
        f"t = {threshold:.3f}: {counts[at]} (p = {rate:.3g})"
    )
    for size in (10_000, 100_000, 1_000_000):
        print(f"  store of {size:>9,}: false-match rate <= {min(1.0, size * rate):.2g}")
    for t, c in zip(grid, counts, strict=True):
        if round(t * 1000) % 50 == 0 and t >= 0.7:
            print(f"  p(cos >= {t:.2f}) = {c / pairs:.3g} ({c} pairs)")


def _upper_95(k: int, n: int) -> float:
    """The one-sided 95% Clopper-Pearson upper bound of a binomial rate."""
    from scipy.stats import beta

    return 1.0 if k >= n else float(beta.ppf(0.95, k + 1, n - k))


if __name__ == "__main__":
    main()
