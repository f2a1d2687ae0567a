"""The paraphrase threshold: calibrated per embedder, not assumed. (filled in below)"""

from __future__ import annotations

from samark.errors import SamarkError

#: sentences of fewer words are matched verbatim only (the threshold was calibrated on
#: sentences of at least this many words)
MIN_WORDS = 4

DEFAULT_THRESHOLDS: dict[str, float] = {"all-minilm-l6-v2": 0.825, "all-mpnet-base-v2": 0.87}


def default_threshold(embedder: str) -> float:
    try:
        return DEFAULT_THRESHOLDS[embedder]
    except KeyError:
        raise SamarkError(
            f"no paraphrase threshold is calibrated for embedder {embedder!r}: run "
            "benchmarks/studies/provenance_threshold.py --embedder NAME and pass the "
            "threshold it prints"
        ) from None
