"""Every registered scheme keeps the one contract (samark.testing's named checks, one test
id each): stable detector ids, EmptyTextError, detect_many equal to detect, JSON-safe
detections."""

from __future__ import annotations

import functools

import pytest

from samark.keys import WatermarkKey
from samark.schemes.base import create_scheme, scheme_info, scheme_names
from samark.testing import Check, SchemeCase, check_scheme, parametrize_checks

HUMAN = [
    "The council approved the budget on Tuesday after a long debate. Residents had asked for "
    "more money for parks and libraries. The mayor said the plan balances those needs.",
    "A storm hit the coast overnight. Power was cut to thousands of homes, and schools stayed "
    "closed on Wednesday. Crews expect to restore most lines by the weekend.",
]
#: PMark's detector re-samples candidates with the generator (minutes per text on a CPU);
#: k-SemStamp fits its k-means regions on human text when built (among the slowest tests:
#: CONTRIBUTING.md)
SLOW_DETECTORS = {"pmark", "k-semstamp"}
#: the contract does not depend on a scheme's budget: PMark's detector re-samples fewer,
#: shorter candidates here (its decode steps are what cost); UPV's key trains its green
#: network for 10 of the recipe's 300 epochs (the training is what costs); k-SemStamp fits
#: 4 regions on 300 sentences, not 8 on 4,000 (embedding them is what costs: about 40 s
#: where the fitted regions are not cached yet, as on a fresh machine)
CHEAP = {
    "pmark": {"candidates": 8, "max_sentence_tokens": 32},
    "upv": {"epochs": 10},
    "k-semstamp": {"clusters": 4, "fit_sentences": 300},
}
DETECTABLE = [n for n in scheme_names() if scheme_info(n).detectable]


def _needs(name: str) -> list[pytest.MarkDecorator]:
    """A scheme that needs an extra (vllm-gumbel: vLLM) is checked where it is installed
    (the vLLM tier, tests/vllm_tier) and skipped, saying so, elsewhere."""
    info = scheme_info(name)
    reason = f"{name} needs {', '.join(info.requires)}"
    return [pytest.mark.skipif(not info.available(), reason=reason)] if info.requires else []


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=[*_needs(n), *([pytest.mark.slow] if n in SLOW_DETECTORS else [])])
        for n in DETECTABLE
    ],
)
@parametrize_checks()
@pytest.mark.slow
def test_every_scheme_keeps_the_detection_contract(name: str, check: Check, minilm) -> None:
    check(_case(name, minilm))


@functools.cache
def _case(name: str, minilm) -> SchemeCase:
    """One case per scheme: its checks share the schemes built (some take seconds)."""
    key = WatermarkKey(b"conformance-key-000000000000000a", minilm.identity)
    other = WatermarkKey(b"conformance-key-000000000000000b", minilm.identity)
    params = {"embedder": minilm} if scheme_info(name).unit == "sentence" else {}
    params.update(CHEAP.get(name, {}))
    return SchemeCase(lambda k: create_scheme(name, key=k, **params), key, other, HUMAN)


def test_the_check_catches_a_broken_scheme(minilm) -> None:
    """A scheme whose detect_many differs from detect and whose detector id drifts is
    caught, both failures named, with the scheme's name."""
    key = WatermarkKey(b"conformance-key-000000000000000a", minilm.identity)
    other = WatermarkKey(b"conformance-key-000000000000000b", minilm.identity)
    broken = create_scheme("kgw", key=key)
    broken.detect_many = lambda texts: [broken.detect(HUMAN[0]) for _ in texts[:-1]] + [None]
    ids = iter(range(10))
    drifting = create_scheme("kgw", key=key)
    drifting.detector_id = lambda: f"kgw/{next(ids)}"  # type: ignore[method-assign]
    built = iter([broken, drifting, broken])
    with pytest.raises(AssertionError) as caught:
        check_scheme(lambda _: next(built), key, other, HUMAN)
    message = str(caught.value)
    assert "check_detect_many_is_detect: kgw: detect_many" in message
    assert "check_detector_id_is_stable: kgw: detector id not stable" in message


def test_the_contract_check_catches_what_a_scheme_misdeclares(minilm, smollm2) -> None:
    """A token scheme that declares an embedder, or another key's id, or an engine of
    none of its registered kinds, is caught and named."""
    from samark.sampling.openai_server import OpenAICompletionsEngine
    from samark.testing import check_declared_contract, check_engine_is_declared

    key = WatermarkKey(b"conformance-key-000000000000000a", minilm.identity)
    other = WatermarkKey(b"conformance-key-000000000000000b", minilm.identity)
    case = SchemeCase(lambda k: create_scheme("kgw", key=k), key, other, HUMAN)
    check_declared_contract(case)
    check_engine_is_declared(case)  # the transformers engine, counting with its tokenizer
    case.scheme.embedder = minilm
    with pytest.raises(AssertionError, match="kgw: a token scheme declares no embedder"):
        check_declared_contract(case)
    case.scheme.embedder = None
    case.scheme.key = other
    with pytest.raises(AssertionError, match="kgw: key_id is not its key's id"):
        check_declared_contract(case)
    case.scheme._lm = OpenAICompletionsEngine("http://127.0.0.1:9/v1", "m")  # type: ignore[assignment]
    with pytest.raises(AssertionError, match="none of its registered engines"):
        check_engine_is_declared(case)


@pytest.mark.parametrize("name", [n for n in scheme_names() if n != "k-semstamp"])
def test_every_scheme_takes_a_validated_config(name: str, minilm) -> None:
    """Each scheme's parameters are its config's fields: an unknown one is a TypeError,
    the config rebuilds the same scheme, and a changed field reaches the scheme.
    (k-semstamp fits k-means regions when built: semstamp's config is the same class.)"""
    from samark.schemes.base import SchemeConfig

    key = WatermarkKey(b"conformance-key-000000000000000a", minilm.identity)
    params = {"embedder": minilm} if scheme_info(name).unit == "sentence" else {}
    scheme = create_scheme(name, key=key, **params)
    config = scheme.config
    assert isinstance(config, SchemeConfig)
    with pytest.raises(TypeError):
        create_scheme(name, key=key, no_such_parameter=1, **params)
    rebuilt = create_scheme(name, key=key, config=config, **params)
    assert rebuilt.config == config
    if scheme_info(name).detectable:
        assert rebuilt.detector_id() == scheme.detector_id()
    changed = create_scheme(name, key=key, max_new_sentences=5, **params)
    assert changed.config.max_new_sentences == 5
    with pytest.raises(ValueError, match="max_new_sentences"):
        create_scheme(name, key=key, max_new_sentences=0, **params)


@pytest.mark.parametrize("name", [n for n in scheme_names() if n not in ("k-semstamp", "pmark")])
def test_declared_capabilities_are_real(name: str, minilm) -> None:
    """What a scheme's catalog entry declares (SchemeInfo's capabilities, which the CLI and
    the server read instead of its name) its factory accepts; what it does not declare, it
    refuses."""
    from samark.schemes.samark.statistics import STATISTICS

    info = scheme_info(name)
    key = WatermarkKey(b"conformance-key-000000000000000a", minilm.identity)
    params = {"embedder": minilm} if info.unit == "sentence" else {}
    declared = {
        "statistics": [{"statistic": s} for s in info.statistics],
        "candidates": [{"candidates": 8}] if info.candidates else [],
        "payload_flags": [{"payload_flags": (-1,)}] if info.payload_flags else [],
    }
    for extra in [e for group in declared.values() for e in group]:
        create_scheme(name, key=key, **params, **extra)
    if info.statistics:
        assert set(info.statistics) == set(STATISTICS)
    else:
        with pytest.raises(TypeError):
            create_scheme(name, key=key, statistic="scan", **params)
    if not info.payload_flags:
        with pytest.raises(TypeError):
            create_scheme(name, key=key, payload_flags=(-1,), **params)
    # a ring's payload reads the flag channels a scheme reports, never its name
    built = create_scheme(name, key=key, **params)
    assert (built.flag_channels > 0) == info.payload_flags
