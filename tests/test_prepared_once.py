"""A text is prepared once (issue 64): one ``POST /v1/detect`` request and one ``samark
detect --keyring`` run split each text into sentences once and embed each sentence once,
for every key of the ring (:mod:`samark.detection.pipeline`). The real segmenter and the
real embedder are wrapped to count their calls."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import samark.cli
import samark.segment
from samark.embed import Embedder
from samark.keys import WatermarkKey
from samark.keys.keyring import Keyring

TEXTS = [
    "The council met on Monday to discuss the new bridge. Residents asked about the cost. "
    "The mayor promised a public hearing next month.",
    "Rain fell across the valley overnight. The river rose by two metres. Farmers moved "
    "their cattle to higher ground before dawn.",
]
TOKEN = "prepared-once-token-0123456789"


class Counts:
    """Calls of the real segmenter (by text) and sentences sent to the real embedder."""

    def __init__(self) -> None:
        self.split: Counter[str] = Counter()
        self.embedded: Counter[str] = Counter()
        #: the real segmenter, uncounted (for the test's own splits)
        self.real_split = samark.segment.split_sentences


@pytest.fixture
def counts(monkeypatch) -> Counts:
    """The segmenter wrapped wherever ``samark`` holds it, and the embedder's model call."""
    import samark.serving.app  # noqa: F401  (every module that holds the segmenter, loaded)

    found = Counts()
    real_split = found.real_split
    real_encode = Embedder._encode

    def split(text: str, *args: Any, **kwargs: Any) -> list[str]:
        found.split[text] += 1
        return real_split(text, *args, **kwargs)

    def encode(self: Embedder, sentences: list[str]) -> Any:
        found.embedded.update(sentences)
        return real_encode(self, sentences)

    for name, module in list(sys.modules.items()):
        if name.startswith("samark") and getattr(module, "split_sentences", None) is real_split:
            monkeypatch.setattr(module, "split_sentences", split)
    monkeypatch.setattr(Embedder, "_encode", encode)
    return found


@pytest.fixture
def ring(tmp_path, minilm) -> Keyring:
    ring = Keyring.create(tmp_path / "ring", minilm.identity)
    for i in range(3):
        ring.add(WatermarkKey(bytes([60 + i]) * 32, minilm.identity), f"k{i}")
    return ring


def _each_once(counts: Counts, texts: list[str]) -> None:
    sentences = [s for t in texts for s in counts.real_split(t)]
    assert len(sentences) == 6
    assert {t: counts.split[t] for t in texts} == dict.fromkeys(texts, 1)
    # nothing else of these texts (a sentence, a prefix) was split either
    assert not [t for t in counts.split if t not in texts and any(s in t for s in sentences)]
    assert {s: counts.embedded[s] for s in sentences} == dict.fromkeys(sentences, 1)


def test_a_detect_request_splits_and_embeds_each_text_once(
    ring: Keyring,
    minilm: Embedder,
    counts: Counts,
    served_app: Callable[[Any], Any],
    post_json: Callable[..., tuple[int, Any]],
) -> None:
    pytest.importorskip("fastapi", reason="serving needs samark[server]")
    from samark.detection.ring_detector import RingDetector
    from samark.schemes import create_scheme
    from samark.schemes.base import SharedResources
    from samark.serving import Keys, ServeSettings, scheme_app

    shared = SharedResources("smollm2-135m-instruct", minilm)
    detector = RingDetector.from_ring(ring, "samark", shared=shared)
    scheme = create_scheme("samark", key=ring.key("k0"), shared=shared)
    settings = ServeSettings(tokens=frozenset({TOKEN}))
    app = scheme_app(scheme, settings, keys=Keys(label="k0", ring=detector), warm_engine=False)
    with served_app(app) as base:
        status, found = post_json(base, "/v1/detect", {"texts": TEXTS}, TOKEN)
    assert status == 200 and [r["ring_keys"] for r in found["data"]] == [3, 3]
    _each_once(counts, TEXTS)


def test_detect_with_a_keyring_splits_and_embeds_the_text_once(
    ring: Keyring, counts: Counts, tmp_path: Path
) -> None:
    text = " ".join(TEXTS)
    out = CliRunner().invoke(
        samark.cli.app, ["detect", text, "--keyring", str(ring.path), "--scheme", "samark"]
    )
    assert out.exit_code in (0, 1), out.output
    assert json.loads(out.stdout.splitlines()[0])["ring_keys"] == 3
    sentences = counts.real_split(text)
    assert counts.split[text] == 1 and len(sentences) == 6
    assert not [t for t in counts.split if t != text and any(s in t for s in sentences)]
    assert {s: counts.embedded[s] for s in sentences} == dict.fromkeys(sentences, 1)
