"""Typed stage records: every record the committed runs hold parses as its stage's type and
is written back in the same layout; bad records fail clearly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from samark.evaluation.records import (
    AttackRecord,
    DetectionRecord,
    GenerationRecord,
    RecordError,
    parse_record,
)
from samark.evaluation.store import RecordStore
from samark.schemes.base import Generation

RUNS = Path(__file__).resolve().parents[1] / "experiments" / "runs"
STORES = ["generations", "attacks", "detections", "lengths", "quality"]


@pytest.mark.parametrize("run", ["local", "paper"])
def test_committed_records_parse_and_round_trip(run: str) -> None:
    seen = 0
    for store in STORES:  # live or compacted (``samark eval compact``)
        for stored in RecordStore(RUNS / run / f"{store}.jsonl").records():
            stored = dict(stored)
            record = parse_record(store, stored)
            stored.pop("key")
            assert record.to_json() == stored, (store, stored.get("item"))
            seen += 1
    assert seen > 1000


def test_bad_records_fail_clearly() -> None:
    good = {
        "key": ["detect", "KGW", "x", "i", "none", ""],
        "detector": "d",
        "scheme": "KGW",
        "item": "i",
        "attack": "none",
        "p_value": 0.5,
        "z": 0.1,
        "statistic": "z",
        "score": 0.1,
        "n_units": 3,
        "seconds": 0.01,
    }
    assert isinstance(parse_record("detections", good), DetectionRecord)
    with pytest.raises(RecordError, match="lacks 'p_value'"):
        parse_record("detections", {k: v for k, v in good.items() if k != "p_value"})
    with pytest.raises(RecordError, match="'n_units' is str"):
        parse_record("detections", {**good, "n_units": "3"})
    with pytest.raises(RecordError, match="'p_value' is NoneType"):
        parse_record("detections", {**good, "p_value": None})
    assert parse_record("detections", {**good, "unit": None}).to_json() == {
        k: v for k, v in good.items() if k != "key"
    }
    with pytest.raises(RecordError, match="'n_units' is bool"):
        parse_record("detections", {**good, "n_units": True})
    with pytest.raises(RecordError, match="lacks 'text'"):
        parse_record("attacks", good)
    with pytest.raises(RecordError, match="not one of"):
        parse_record("quality", good)
    with pytest.raises(RecordError, match="no stage store"):
        parse_record("judgements", good)
    # an empty text is a miss with p = 1, recorded with the same fields
    miss = DetectionRecord.nothing_to_score(0.0, detector="d", scheme="h", item="i", attack="a")
    assert miss.p_value == 1.0 and "unit" not in miss.to_json()


def test_generation_and_attack_records_keep_their_layout() -> None:
    g = Generation(
        scheme="samark",
        prompt="P.",
        text="A. B.",
        sentences=("A.", "B."),
        tokens_sampled=10,
        output_tokens=4,
        seconds=1.0,
    )
    rec = GenerationRecord.of("SAMark", "item1", 7, g).to_json()
    expected = {"scheme": "SAMark", "item": "item1", "seed": 7, **g.to_dict()}
    expected["scheme"] = "SAMark"
    assert json.loads(json.dumps(rec)) == json.loads(json.dumps(expected))
    assert list(rec)[:6] == ["scheme", "item", "seed", "prompt", "text", "sentences"]
    empty = AttackRecord(
        scheme="S", item="i", attack="Doc-P", text="", seconds=0.0, source_empty=True
    )
    assert empty.to_json() == {
        "scheme": "S",
        "item": "i",
        "attack": "Doc-P",
        "text": "",
        "seconds": 0.0,
        "source_empty": True,
    }
