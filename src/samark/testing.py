"""The contract every scheme keeps, as a check a test (ours or a plugin's) can run:
``check_scheme`` raises ``AssertionError`` naming the first broken promise.

- a stable detector id (the harness keys a run's records by it; a run holds one key, so
  the id need not name the key, and the baselines' do not);
- a config: a frozen :class:`~samark.schemes.base.SchemeConfig`, equal for two schemes
  built alike;
- ``EmptyTextError`` for a text with nothing to score;
- ``detect_many`` is ``detect`` on each text (``None`` for one with nothing to score);
- a ``Detection`` whose p-value is in [0, 1], whose unit is the registered one, and whose
  ``to_dict`` is strict JSON (no NaN, no infinity);
- with ``generate``: seeded generation is deterministic, and the scheme's own key finds
  more evidence in its text than another key does.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Sequence

from samark.detection import Detection
from samark.errors import EmptyTextError
from samark.keys import WatermarkKey
from samark.schemes.base import SchemeConfig, Watermark, scheme_info

Builder = Callable[[WatermarkKey], Watermark]


def check_scheme(
    build: Builder,
    key: WatermarkKey,
    other_key: WatermarkKey,
    texts: Sequence[str],
    *,
    generate: bool = False,
    prompt: str = "The city council met on Tuesday to discuss the new budget.",
    sentences: int = 3,
) -> None:
    """Check the scheme that ``build`` makes from a key (``create_scheme`` with its
    parameters, say) on human ``texts``; with ``generate``, on its own text too."""
    scheme, again, other = build(key), build(key), build(other_key)
    name = scheme.name
    assert scheme.detector_id() == again.detector_id(), f"{name}: detector id not stable"
    _check_config(name, scheme, again)
    for empty in ("", "   \n "):
        try:
            scheme.detect(empty)
        except EmptyTextError:
            pass
        else:
            raise AssertionError(f"{name}: detect({empty!r}) must raise EmptyTextError")
    batch = scheme.detect_many([*texts, ""])
    assert len(batch) == len(texts) + 1 and batch[-1] is None, f"{name}: detect_many's None"
    for text, many in zip(texts, batch, strict=False):
        one = scheme.detect(text)
        assert many is not None, f"{name}: detect_many dropped a text"
        _check_detection(name, one)
        # batched embedding moves float rounding: at most a step of the null pool
        step = 2.0 / (int(one.details.get("n_null", 0)) + 1) if "n_null" in one.details else 1e-9
        assert abs(one.p_value - many.p_value) <= step, (
            f"{name}: detect_many ({many.p_value}) is not detect ({one.p_value})"
        )
    if generate:
        first = scheme.generate(prompt, max_new_sentences=sentences, seed=7)
        second = again.generate(prompt, max_new_sentences=sentences, seed=7)
        assert first.text == second.text, f"{name}: seeded generation is not deterministic"
        assert first.text.strip(), f"{name}: generated nothing"
        own, others = scheme.detect(first.text), other.detect(first.text)
        assert own.p_value < others.p_value, (
            f"{name}: another key finds as much evidence (p {others.p_value}) as its own "
            f"(p {own.p_value}) in its text"
        )


def _check_config(name: str, scheme: Watermark, again: Watermark) -> None:
    config = getattr(scheme, "config", None)
    assert isinstance(config, SchemeConfig), f"{name}: scheme.config must be a SchemeConfig"
    assert config == getattr(again, "config", None), f"{name}: config not stable"
    first = dataclasses.fields(config)[0].name
    try:
        setattr(config, first, getattr(config, first))
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError(f"{name}: its config must be frozen")


def _check_detection(name: str, d: Detection) -> None:
    assert 0.0 <= d.p_value <= 1.0 and not math.isnan(d.p_value), f"{name}: p = {d.p_value}"
    assert 0.0 < d.alpha < 1.0, f"{name}: alpha = {d.alpha}"
    assert d.unit == scheme_info(name).unit, f"{name}: unit {d.unit!r} is not the registered"
    assert d.n_units >= 1, f"{name}: a scored text with no units"
    for details in (False, True):
        try:
            json.dumps(d.to_dict(details=details), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise AssertionError(f"{name}: to_dict(details={details}) is not JSON: {exc}") from None
