"""The evaluation harness detects through the pipeline (:mod:`samark.detection.pipeline`)
and can evaluate a keyring: a row with ``ring_keys`` detects with the run's key and its
siblings, and records the ring's family-wise answer."""

from __future__ import annotations

import numpy as np
import pytest

from samark.detection.ring_detector import MAX_STATISTIC
from samark.embed import Embedder
from samark.evaluation.experiment import Experiment, ExperimentError
from samark.evaluation.runner import Run
from samark.evaluation.stages.detect import detect_into
from samark.evaluation.store import RecordStore

ROWS = """
name = "ring"
seed = 3
embedder = "all-minilm-l6-v2"
[dataset]
name = "cnn_dailymail"
prompts = 2
sentences = 2
human_negatives = 5
[[schemes]]
name = "samark"
params = { candidates = 4, n_null = 99, statistic = "scan" }
[[schemes]]
name = "samark"
label = "samark ring"
texts_from = "samark"
ring_keys = 4
params = { candidates = 4, n_null = 99, statistic = "scan" }
"""


def _marked(embedder: Embedder, key_pivots: np.ndarray, n: int = 8) -> str:
    """``n`` human sentences (Wikipedia leads) on one flag side of both of a key's
    channels, the most aligned: a text the key marked, as SAMark chooses among
    candidates."""
    from samark.datasets import load_dataset
    from samark.segment import split_sentences

    pool = [s for d in load_dataset("wikipedia_leads")[:60] for s in split_sentences(d.text)]
    pool = [s for s in dict.fromkeys(pool) if 40 < len(s) < 200][:240]
    signed = embedder.encode(pool) @ key_pivots.T
    best = np.argsort(-np.minimum(signed[:, 0], signed[:, 1]))[:n]
    return " ".join(pool[i] for i in best)


def test_a_ring_row_records_the_keyrings_answer(tmp_path, minilm) -> None:
    run = Run(Experiment.parse(ROWS), tmp_path / "run", progress=False)
    one, ring = run.experiment.schemes
    assert ring.fingerprint != one.fingerprint and ring.owner == (one.label, one.fingerprint)
    single, keyring = run.detector(one), run.detector(ring)
    assert single.single_key and len(keyring.entries) == 4 and keyring.method == MAX_STATISTIC
    # the run's key (it wrote the texts) first, then siblings of their own
    assert keyring.schemes[0].key_id == run.key.key_id
    assert len({s.key_id for s in keyring.schemes}) == 4
    assert run.detector_id(ring) == f"{run.detector_id(one)}/ring4"

    text = _marked(run.embedder, run.key.samark.pivots(run.embedder.dim, 2))
    store = RecordStore(tmp_path / "detections.jsonl")
    meta = {"detector": "d", "scheme": "s", "item": "i", "attack": "none"}
    detect_into(store, single, ("one",), text, meta)
    detect_into(store, keyring, ("ring",), text, meta)
    detect_into(store, keyring, ("empty",), "   ", meta)
    alone, found, empty = store.get(("one",)), store.get(("ring",)), store.get(("empty",))
    assert alone is not None and found is not None and empty is not None
    # one key: the scheme's own detection, as before the pipeline
    assert alone["p_value"] == pytest.approx(run.scheme(one).detect(text).p_value, abs=0.011)
    assert "ring" not in alone
    # the ring: its family-wise p-value, the key it attributes, that key's own p
    answer = keyring.detect(text)
    assert found["p_value"] == answer.p_value and answer.is_watermarked
    assert found["ring"] == {
        "method": MAX_STATISTIC,
        "keys": 4,
        "key_label": "key-00",
        "key_p_value": answer.key_p_value,
    }
    assert answer.key_p_value <= found["p_value"]
    assert empty["n_units"] == 0 and empty["p_value"] == 1.0


def test_ring_keys_is_two_or_more() -> None:
    with pytest.raises(ExperimentError, match="ring_keys must be an integer >= 2"):
        Experiment.parse(ROWS.replace("ring_keys = 4", "ring_keys = 1"))
