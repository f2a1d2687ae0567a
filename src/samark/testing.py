"""The contract every scheme keeps, as named checks a test (ours or a plugin's) can run one
by one (as scikit-learn's ``parametrize_with_checks`` does), each its own test id:

- ``check_detector_id_is_stable``: the harness keys a run's records by it (a run holds one
  key, so the id need not name the key, and the baselines' do not);
- ``check_config_is_frozen_and_stable``: a frozen :class:`~samark.schemes.base.SchemeConfig`,
  equal for two schemes built alike;
- ``check_empty_text_raises``: ``EmptyTextError`` for a text with nothing to score;
- ``check_detect_many_is_detect``: ``detect`` on each text (``None`` for one with nothing
  to score), up to a step of a null pool;
- ``check_detections_are_valid``: p in [0, 1], the registered unit, strict-JSON
  ``to_dict`` (no NaN, no infinity);
- ``check_declared_contract``: what callers read instead of probing (``key_id``,
  ``info``, ``embedder``: :class:`~samark.schemes.base.Watermark`) is what it is;
- ``check_engine_is_declared``: ``engine`` is the engine it writes with, one of its
  registered engines (by their declared abilities), and ``token_counter`` counts with its
  ``tokenizer``;
- with generation: ``check_seeded_generation_is_deterministic`` and
  ``check_own_key_finds_more_evidence`` (than another key, in the scheme's own text).

``check_scheme`` runs them all and reports every broken promise, not only the first.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from samark.detection_result import Detection
from samark.errors import EmptyTextError
from samark.keys import WatermarkKey
from samark.schemes.base import SchemeConfig, Watermark, scheme_info
from samark.schemes.catalog import SchemeInfo

if TYPE_CHECKING:
    import pytest

Builder = Callable[[WatermarkKey], Watermark]


@dataclasses.dataclass(eq=False)
class SchemeCase:
    """What the checks of one scheme share: how to build it, two keys and human texts.
    The schemes and the seeded generation are built once, on first use."""

    build: Builder
    key: WatermarkKey
    other_key: WatermarkKey
    texts: Sequence[str]
    prompt: str = "The city council met on Tuesday to discuss the new budget."
    sentences: int = 3

    @functools.cached_property
    def scheme(self) -> Watermark:
        return self.build(self.key)

    @functools.cached_property
    def again(self) -> Watermark:
        """The same scheme built a second time, alike."""
        return self.build(self.key)

    @functools.cached_property
    def other(self) -> Watermark:
        return self.build(self.other_key)

    @property
    def name(self) -> str:
        return self.scheme.name

    @functools.cached_property
    def generated(self) -> str:
        return self.scheme.generate(self.prompt, max_new_sentences=self.sentences, seed=7).text


Check = Callable[[SchemeCase], None]


def check_detector_id_is_stable(case: SchemeCase) -> None:
    assert case.scheme.detector_id() == case.again.detector_id(), (
        f"{case.name}: detector id not stable"
    )


def check_config_is_frozen_and_stable(case: SchemeCase) -> None:
    name, config = case.name, case.scheme.config
    assert isinstance(config, SchemeConfig), f"{name}: scheme.config must be a SchemeConfig"
    assert config == case.again.config, f"{name}: config not stable"
    first = dataclasses.fields(config)[0].name
    try:
        setattr(config, first, getattr(config, first))
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError(f"{name}: its config must be frozen")


def check_empty_text_raises(case: SchemeCase) -> None:
    for empty in ("", "   \n "):
        try:
            case.scheme.detect(empty)
        except EmptyTextError:
            pass
        else:
            raise AssertionError(f"{case.name}: detect({empty!r}) must raise EmptyTextError")


def check_detect_many_is_detect(case: SchemeCase) -> None:
    name = case.name
    batch = case.scheme.detect_many([*case.texts, ""])
    assert len(batch) == len(case.texts) + 1 and batch[-1] is None, f"{name}: detect_many's None"
    for text, many in zip(case.texts, batch, strict=False):
        one = case.scheme.detect(text)
        assert many is not None, f"{name}: detect_many dropped a text"
        # batched embedding moves float rounding: at most a step of the null pool
        n_null = one.details.get("n_null")
        step = 2.0 / (int(n_null) + 1) if isinstance(n_null, int | float) else 1e-9
        assert abs(one.p_value - many.p_value) <= step, (
            f"{name}: detect_many ({many.p_value}) is not detect ({one.p_value})"
        )


def check_detections_are_valid(case: SchemeCase) -> None:
    for text in case.texts:
        _check_detection(case.name, case.scheme.detect(text))


def check_seeded_generation_is_deterministic(case: SchemeCase) -> None:
    second = case.again.generate(case.prompt, max_new_sentences=case.sentences, seed=7)
    assert case.generated == second.text, f"{case.name}: seeded generation is not deterministic"
    assert case.generated.strip(), f"{case.name}: generated nothing"


def check_own_key_finds_more_evidence(case: SchemeCase) -> None:
    own, others = case.scheme.detect(case.generated), case.other.detect(case.generated)
    assert own.p_value < others.p_value, (
        f"{case.name}: another key finds as much evidence (p {others.p_value}) as its own "
        f"(p {own.p_value}) in its text"
    )


def check_declared_contract(case: SchemeCase) -> None:
    from samark.embed import Embedder

    scheme, name = case.scheme, case.name
    info = scheme.info
    assert isinstance(info, SchemeInfo) and info.name == name, f"{name}: info is not its own"
    assert scheme.key_id == case.key.key_id, f"{name}: key_id is not its key's id"
    embedder = scheme.embedder
    if info.unit == "sentence":
        assert isinstance(embedder, Embedder), f"{name}: a sentence scheme declares its embedder"
        assert embedder.identity == case.key.embedder, f"{name}: not the key's embedder"
    else:
        assert embedder is None, f"{name}: a token scheme declares no embedder"


def check_engine_is_declared(case: SchemeCase) -> None:
    from samark.sampling.base import engine_abilities
    from samark.sampling.engines import engine_info

    scheme, name = case.scheme, case.name
    engine = scheme.engine
    assert engine is not None, f"{name}: a scheme that writes declares its engine"
    registered = {e: engine_info(e).abilities for e in scheme.info.engines}
    assert engine_abilities(engine) in registered.values(), (
        f"{name}: its engine ({engine.name}) is none of its registered engines {list(registered)}"
    )
    tokenizer, counter = scheme.tokenizer, scheme.token_counter
    if tokenizer is not None:
        assert counter is not None, f"{name}: a tokenizer but no token counter"
        want = len(tokenizer(case.prompt, add_special_tokens=False)["input_ids"])
        assert counter(case.prompt) == want, f"{name}: token_counter is not its tokenizer's"


#: the checks of a detector, and those that also generate
DETECTION_CHECKS: tuple[Check, ...] = (
    check_detector_id_is_stable,
    check_config_is_frozen_and_stable,
    check_empty_text_raises,
    check_detect_many_is_detect,
    check_detections_are_valid,
    check_declared_contract,
    check_engine_is_declared,
)
GENERATION_CHECKS: tuple[Check, ...] = (
    check_seeded_generation_is_deterministic,
    check_own_key_finds_more_evidence,
)


def scheme_checks(*, generate: bool = False) -> tuple[Check, ...]:
    """The named checks, in order (with ``generate``, the generation checks too)."""
    return DETECTION_CHECKS + (GENERATION_CHECKS if generate else ())


def parametrize_checks(*, generate: bool = False) -> pytest.MarkDecorator:
    """A pytest ``parametrize`` mark over the named checks (argument ``check``), each
    test id its check's name: ``@parametrize_checks()`` then ``check(case)``."""
    import pytest

    checks = scheme_checks(generate=generate)
    return pytest.mark.parametrize("check", checks, ids=[c.__name__ for c in checks])


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
    """Run every check on the scheme that ``build`` makes from a key (``create_scheme``
    with its parameters, say) and human ``texts``; with ``generate``, on its own text too.
    Raises one ``AssertionError`` naming every check that failed."""
    case = SchemeCase(build, key, other_key, texts, prompt, sentences)
    failed = []
    for check in scheme_checks(generate=generate):
        try:
            check(case)
        except AssertionError as exc:
            failed.append(f"{check.__name__}: {exc}")
    if failed:
        raise AssertionError("; ".join(failed))


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
