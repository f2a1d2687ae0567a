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
