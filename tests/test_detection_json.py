"""One detection, one JSON: the CLI, the server, Ray and the evaluation store write a
detection through :meth:`Detection.to_dict`, and a single key answers as a ring of one."""

from __future__ import annotations

import json
import math

import pytest

from samark.detection.ring_detector import RingDetector
from samark.detection_result import Detection, json_safe
from samark.errors import EmptyTextError
from samark.evaluation.records import DetectionRecord
from samark.evaluation.store import RecordStore
from samark.keys import WatermarkKey
from samark.schemes import create_scheme

TEXT = (
    "The council met on Tuesday to discuss the new budget. Several members asked for more "
    "money for schools. The mayor said the city could not afford it this year."
)


def _detection(z: float) -> Detection:
    return Detection(
        scheme="kgw",
        p_value=1e-9,
        alpha=0.01,
        z=z,
        statistic="z",
        score=z,
        n_units=40,
        unit="token",
        details={"green_fraction": 0.61, "evidence": (1.0, float("-inf"))},
    )


def test_non_finite_numbers_are_null_in_every_output(tmp_path) -> None:
    d = _detection(float("inf"))
    out = d.to_dict(details=True)
    assert out["z"] is None and out["score"] is None
    assert out["details"]["evidence"] == [1.0, None]
    json.dumps(out, allow_nan=False)  # strict JSON: no Infinity, no NaN
    assert json_safe({"a": (float("nan"), 2.0)}) == {"a": [None, 2.0]}
    # the evaluation store writes the same fields, encoded the same way
    store = RecordStore(tmp_path / "detections.jsonl")
    meta = {"detector": "kgw/x", "scheme": "row", "item": "0", "attack": "none"}
    written = store.append(("d", "0"), DetectionRecord.of(d, 0.5, **meta).to_json())
    summary = d.to_dict()
    for name in ("p_value", "z", "statistic", "score", "n_units", "unit", "details"):
        assert written[name] == summary[name], name
    line = (tmp_path / "detections.jsonl").read_text().splitlines()[-1]
    assert json.loads(line)["z"] is None
    assert DetectionRecord.from_json(json.loads(line)).z is None  # and it reads back


def test_a_single_key_is_a_ring_of_one_that_answers_as_its_scheme(minilm) -> None:
    key = WatermarkKey(b"detection-json-key-0000000000000", minilm.identity)
    scheme = create_scheme("kgw", key=key, alpha=0.01)
    own = scheme.detect(TEXT)
    ring = RingDetector.of_scheme(scheme)
    answer = ring.detect(TEXT)
    assert answer.single_key and answer.ring_size == 1 and ring.method == "holm"
    assert answer.p_value == own.p_value and answer.detection == own
    # its JSON is the key's own detection's, field for field, with the key's public id
    assert answer.to_dict() == own.to_dict() | {"key_id": key.key_id}
    assert answer.to_dict(details=True) == own.to_dict(details=True) | {"key_id": key.key_id}
    assert "ring_keys" not in answer.to_dict()
    words = answer.describe()
    assert words.startswith("watermarked" if own.is_watermarked else "not watermarked")
    assert "ring" not in words and f"{own.n_units} tokens" in words
    assert math.isfinite(own.p_value)
    # the server's answer is the same serialisation, cut to the fields /v1/detect gives
    from samark.detection.pipeline import prepare
    from samark.serving.answers import SINGLE_KEY_FIELDS, answers

    served = answers(ring, prepare(ring, [TEXT, "   "]), details=False)
    verdict = served[0].pop("verdict")  # and the one verdict (samark.verdict), in tokens
    assert served[0] == {k: answer.to_dict()[k] for k in SINGLE_KEY_FIELDS}
    assert verdict["record"] == "no_record"
    assert verdict["reasons"][0].endswith(
        f"over {own.n_units} tokens; the decision needs p below 0.01."
    )
    with pytest.raises(EmptyTextError) as empty:  # an empty text: in the scheme's own words
        scheme.detect("   ")
    assert served[1] == {"error": str(empty.value)}
