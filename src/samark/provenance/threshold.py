"""The paraphrase threshold: calibrated per embedder on human sentences, not assumed.

A checked sentence is a paraphrase of a stored one when the cosine of their unit
embeddings is at least the threshold. The defaults below were measured by
``benchmarks/studies/provenance_threshold.py`` (2026-11-27; results in
docs/results/2026-11-27-provenance-threshold, explained in docs/provenance.md):

- 12,776 human sentences of at least ``MIN_WORDS`` words, from 1,670 documents of six
  corpora (CNN/DailyMail, Wikipedia leads, Jane Austen, the Debian handbook, Reuters,
  fortunes), the documents split at random into halves A and B;
- each sentence checked against a store of about 4,800 sentences of its half's *other*
  documents; pairs with equal normal forms (the keyed hash calls those served) and
  copies (at least half their words shared) left out;
- each half picks the smallest threshold with at most 1e-3 false matches per sentence;
  the default is the larger pick, measured on the other half.

=================== ========= ============================================================
embedder            threshold false matches per sentence, store of ~4,800 (95% upper bound)
=================== ========= ============================================================
all-mpnet-base-v2   0.905     3.9e-4 over both halves (8.2e-4); held out 0 of 6,360 (4.7e-4)
all-minilm-l6-v2    0.825     6.3e-4 over both halves (1.1e-3); held out 2 of 6,360 (9.9e-4)
=================== ========= ============================================================

The rate grows with the store, about in proportion: the union bound from the pair rates
gives at most 7.4e-4 / 7.4e-3 / 7.4e-2 (mpnet) and 2.8e-3 / 2.8e-2 / 0.28 (MiniLM) at
10,000 / 100,000 / 1,000,000 stored sentences. A larger record wants a higher threshold
(``ProvenanceRecord(threshold=...)``, ``detect --paraphrase-threshold``).
"""

from __future__ import annotations

from samark.provenance.store import ProvenanceError

#: sentences of fewer words are matched verbatim only (the threshold was calibrated on
#: sentences of at least this many words)
MIN_WORDS = 4

#: embedder name -> its calibrated paraphrase threshold (see the module docstring)
DEFAULT_THRESHOLDS: dict[str, float] = {
    "all-mpnet-base-v2": 0.905,
    "all-minilm-l6-v2": 0.825,
}


#: embedder -> edit kind -> the share of served sentences changed by that edit that the
#: record still finds (a paraphrase at the default threshold), measured on the paper
#: run's real word substitutions (Word-S) and deletions (Word-D: 5% or 15% of a text's
#: words, so a changed sentence has a word or a few changed) of 70 texts by
#: ``benchmarks/studies/edited_recall.py`` (docs/results/2026-12-05-edited-recall). The
#: rest read "not served": a light edit can hide a served sentence.
EDITED_FOUND: dict[str, dict[str, float]] = {
    # of 455 / 721 changed sentences (Word-S 5% / 15%) and 447 / 615 (Word-D 5% / 15%)
    "all-mpnet-base-v2": {
        "word-s-5": 0.681,
        "word-s-15": 0.394,
        "word-d-5": 0.839,
        "word-d-15": 0.572,
    },
}


def edited_found(embedder: str, threshold: float) -> dict[str, float] | None:
    """The measured shares of :data:`EDITED_FOUND` for ``embedder``, where ``threshold``
    is the one they were measured at (its default); else None."""
    found = EDITED_FOUND.get(embedder)
    if not found or DEFAULT_THRESHOLDS.get(embedder) != threshold:
        return None
    return dict(found)


def default_threshold(embedder: str) -> float:
    """The calibrated paraphrase threshold of ``embedder`` (a preset name); an embedder
    without one is a :class:`ProvenanceError` that says how to calibrate it."""
    try:
        return DEFAULT_THRESHOLDS[embedder]
    except KeyError:
        raise ProvenanceError(
            f"no paraphrase threshold is calibrated for embedder {embedder!r}: run "
            "benchmarks/studies/provenance_threshold.py --embedder NAME and pass the "
            "threshold it prints (ProvenanceRecord(threshold=...), detect "
            "--paraphrase-threshold)"
        ) from None
