"""``samark serve`` on loopback: the official ``openai`` client against the real app
(uvicorn), with the SmolLM2 generator in-process, and the faults an operator will meet.
Serving behind a real upstream server (``transformers serve``) is in test_server.py, which
starts that server once."""

from __future__ import annotations

import json
import logging
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="`samark serve` needs samark[server]")
pytest.importorskip("uvicorn", reason="`samark serve` needs samark[server]")
pytest.importorskip("openai", reason="`samark serve` needs samark[server]")

import openai

from samark import SAMark, SAMarkConfig
from samark.errors import SamarkError
from samark.sampling.batching import BatchingEngine
from samark.sampling.openai_server import OpenAICompletionsEngine
from samark.serving import ServeSettings, scheme_app, tokenizer_chat_renderer

USER = "user-token-0123456789abcdef"
ADMIN = "admin-token-0123456789abcdef"
HUMAN = (
    "The council approved the budget on Tuesday after a long debate. Residents had asked "
    "for more money for parks and libraries. The mayor said the plan balances those needs. "
    "Opponents argued that taxes would rise next year. The vote was five to two."
)
CONFIG = SAMarkConfig.of(candidates=4, max_sentence_tokens=40)

#: every response body and log line of this module, for the key check at its end
SEEN: list[str] = []
#: the secrets of the served keyring's keys, checked at the end too
RING_SECRETS: list[bytes] = []


class _Collect(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        SEEN.append(self.format(record))


@pytest.fixture(scope="module", autouse=True)
def _logs() -> Iterator[None]:
    handler = _Collect(level=logging.DEBUG)
    root = logging.getLogger()
    old = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield
    root.removeHandler(handler)
    root.setLevel(old)


#: the local engine as ``samark serve`` builds it: concurrent generations share its batches
ENGINE: list[BatchingEngine] = []


@pytest.fixture(scope="module")
def local(mpnet, mpnet_key, smollm2, served_app) -> Iterator[str]:
    ENGINE.append(BatchingEngine(smollm2))
    scheme = SAMark(mpnet_key, config=CONFIG, embedder=mpnet, engine=ENGINE[0])
    settings = ServeSettings(
        tokens=frozenset({USER}),
        admin_tokens=frozenset({ADMIN}),
        max_body_bytes=50_000,
        default_sentences=2,
        max_sentences=3,
    )
    app = scheme_app(scheme, settings, render_chat=tokenizer_chat_renderer(smollm2.tokenizer))
    with served_app(app) as base:
        yield base


@pytest.fixture(scope="module")
def ringed(mpnet, smollm2, served_app, tmp_path_factory) -> Iterator[tuple[str, Any]]:
    """A server of a keyring of two keys (a 1-bit payload), marking with the second."""
    from samark.detection.ring_detector import RingDetector
    from samark.keys import WatermarkKey
    from samark.keys.keyring import Keyring
    from samark.models import DEFAULT_GENERATOR
    from samark.schemes.base import SharedResources
    from samark.serving import Keys

    ring = Keyring.create(tmp_path_factory.mktemp("served-ring") / "ring", mpnet.identity)
    for i, label in enumerate(["tenant-a", "tenant-b"]):
        secret = bytes([200 + i]) * 32
        RING_SECRETS.append(secret)
        ring.add(WatermarkKey(secret, mpnet.identity), label)
    schemes = {
        i: (e.label, SAMark(ring.key(e.label), config=CONFIG, embedder=mpnet, engine=smollm2))
        for i, e in enumerate(ring.entries)
    }
    detector = RingDetector.from_ring(
        ring, shared=SharedResources(DEFAULT_GENERATOR, mpnet), statistic="scan"
    )
    settings = ServeSettings(tokens=frozenset({USER}), default_sentences=1, max_sentences=2)
    keys = Keys(label="tenant-b", payloads=schemes, ring=detector)
    app = scheme_app(schemes[1][1], settings, keys=keys)
    with served_app(app) as base:
        yield base, ring


def _client(base: str, token: str = USER) -> Any:
    return openai.OpenAI(base_url=f"{base}/v1", api_key=token, max_retries=0, timeout=300)


def _post(
    base: str,
    path: str,
    body: Any,
    token: str | None = USER,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:
    """POST a dict (as JSON), raw bytes, or an iterator of bytes (sent chunked)."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    request = urllib.request.Request(
        f"{base}{path}", data=data, headers={"content-type": "application/json", **(headers or {})}
    )
    if token:
        request.add_header("authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    SEEN.append(raw.decode("utf-8", "replace"))
    return status, json.loads(raw)


def _get(base: str, path: str) -> tuple[int, str]:
    with urllib.request.urlopen(f"{base}{path}", timeout=30) as response:
        return response.status, response.read().decode()


@pytest.mark.slow
def test_chat_completion_with_the_openai_client_streamed_and_not(local) -> None:
    client = _client(local)
    messages = [{"role": "user", "content": "Tell me about the city council's new budget."}]
    whole = client.chat.completions.create(model="samark", messages=messages, seed=11)
    SEEN.append(whole.model_dump_json())
    choice = whole.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content and choice.message.content == choice.message.content.strip()
    assert choice.finish_reason in ("stop", "length")
    assert whole.usage is not None and whole.usage.completion_tokens > 0
    assert whole.usage.prompt_tokens > 5

    chunks = list(
        client.chat.completions.create(model="samark", messages=messages, seed=11, stream=True)
    )
    SEEN.extend(c.model_dump_json() for c in chunks)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks)
    # the same seed draws the same sentences, one SSE event per sentence
    assert streamed.strip() == choice.message.content
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == choice.finish_reason
    assert len([c for c in chunks if c.choices[0].delta.content]) >= 1


def test_completions_route_and_token_budget(local, mpnet_key) -> None:
    client = _client(local)
    prompt = "The city council met on Monday to discuss the budget."
    done = client.completions.create(
        model="samark", prompt=prompt, seed=2, extra_body={"max_sentences": 1}
    )
    text = done.choices[0].text
    assert text.strip() and done.choices[0].finish_reason in ("stop", "length")
    # every marked response names the key that marked it (by id, never the key)
    assert done.model_extra["samark"] == {"key_id": mpnet_key.key_id, "key_label": None}
    # a budget smaller than any sentence: nothing may be returned, and it says why
    tight = client.completions.create(model="samark", prompt=prompt, seed=2, max_tokens=1)
    assert tight.choices[0].text == "" and tight.choices[0].finish_reason == "length"
    SEEN.extend([done.model_dump_json(), tight.model_dump_json()])


def test_detect_route_roles_and_batches(local) -> None:
    status, one = _post(local, "/v1/detect", {"text": HUMAN})
    assert status == 200
    assert set(one) == {
        *("scheme", "p_value", "is_watermarked", "alpha", "statistic", "n_units", "unit"),
        "key_id",  # the public id of the key it tested (the detection page shows it)
        "verdict",  # the mark (and, with details and a record, the record) as one story
    }
    assert one["n_units"] == 5 and 0 < one["p_value"] <= 1
    assert one["verdict"]["record"] == "no_record" and one["verdict"]["code"].startswith(
        "not_marked." if one["p_value"] >= 0.05 else ("weak." if one["p_value"] >= 0.01 else "")
    )
    # localisation only for an admin token
    status, refused = _post(local, "/v1/detect", {"text": HUMAN, "details": True})
    assert status == 403 and "admin" in refused["error"]["message"]
    status, admin = _post(local, "/v1/detect", {"text": HUMAN, "details": True}, token=ADMIN)
    assert status == 200 and len(admin["sentence_p_values"]) == 5
    assert admin["p_value"] == one["p_value"]
    # a batch keeps its order and reports a bad item in place
    status, batch = _post(local, "/v1/detect", {"texts": [HUMAN, "   ", HUMAN]})
    assert status == 200 and [("error" in r) for r in batch["data"]] == [False, True, False]
    assert batch["data"][0] == one == batch["data"][2]
    assert batch["data"][1] == {"error": "the text has no sentence to score"}
    status, empty = _post(local, "/v1/detect", {"text": ""})
    assert status == 400 and empty["error"]["message"]
    _, metrics = _get(local, "/metrics")
    assert 'samark_detections_total{outcome="not_watermarked"}' in metrics
    assert 'samark_detections_total{outcome="error"}' in metrics
    assert 'samark_requests_total{route="/v1/detect",status="403"} 1.0' in metrics


def test_auth_and_bad_requests_get_json_errors(local) -> None:
    with pytest.raises(openai.AuthenticationError):
        _client(local, token="wrong-token-0123456789abcdef").models.list()
    assert [m.id for m in _client(local).models.list().data] == ["samark"]
    status, body = _post(local, "/v1/detect", {"text": HUMAN}, token=None)
    assert status == 401 and body["error"]["type"] == "authentication_error"
    assert _get(local, "/healthz")[0] == 200  # health needs no token
    cases = [
        (b'{"text": "unterminated', 400, "not valid JSON"),
        (b"\xff\xfe\x00binary\x00", 400, "not valid JSON"),
        # raw binary (an image): our words, not the framework's "error parsing the body"
        (b"\x89PNG\r\n\x1a\n\x00\x00IHDR\xde\xad", 400, "the request body is binary, not JSON"),
        # a JSON text of control characters: refused as `samark detect` refuses binary
        (json.dumps({"text": "\u0000\u0001\u0002"}).encode(), 400, "the text is binary, not"),
        (b'{"text": 3}', 400, "text"),
        (b'{"texts": ["a"], "text": "b"}', 400, "exactly one"),
        (json.dumps({"text": "x" * 60_000}).encode(), 413, "larger than this server takes (50 kB)"),
    ]
    for raw, want, words in cases:
        status, body = _post(local, "/v1/detect", raw)
        assert status == want, (raw[:30], body)
        assert words in body["error"]["message"]
    # a chunked body (no Content-Length) over the limit is cut off too
    status, body = _post(
        local, "/v1/detect", iter([b'{"text": "', b"y" * 60_000, b'"}']), headers={}
    )
    assert status == 413
    with pytest.raises(openai.BadRequestError, match="n > 1"):
        _client(local).chat.completions.create(
            model="samark", messages=[{"role": "user", "content": "hi"}], n=2
        )
    with pytest.raises(openai.BadRequestError, match="no upstream"):
        _client(local).completions.create(
            model="samark", prompt="Hello.", extra_body={"watermark": False}
        )
    with pytest.raises(openai.NotFoundError):
        _client(local).embeddings.create(model="samark", input="hello")


def test_concurrent_detection_clients(local) -> None:
    results: list[int] = []

    def client() -> None:
        for _ in range(3):
            results.append(_post(local, "/v1/detect", {"text": HUMAN})[0])

    threads = [threading.Thread(target=client) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert results == [200] * 24


@pytest.mark.slow
def test_concurrent_generation_clients_share_the_engines_batches(local, mpnet_key) -> None:
    """Three clients at once: every one answered with its own marked text, and their
    candidate draws decoded together (the engine's largest batch held several)."""
    engine = ENGINE[0]
    before = engine.batches, engine.draws
    engine.largest = 0  # this test's batches only
    answers: list[Any] = [None] * 3

    def client(i: int) -> None:
        answers[i] = _client(local).completions.create(
            model="samark", prompt=f"Report {i}: the city council met on Monday.", seed=i
        )

    threads = [threading.Thread(target=client, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    SEEN.extend(a.model_dump_json() for a in answers)
    assert all(a.choices[0].text.strip() for a in answers)
    assert all(a.model_extra["samark"]["key_id"] == mpnet_key.key_id for a in answers)
    batches, draws = engine.batches - before[0], engine.draws - before[1]
    assert engine.largest >= 2 and draws > batches  # draws of several clients in one batch


def test_a_token_scheme_is_served_through_the_same_interface(mpnet_key, smollm2, served_app):
    """``samark serve --scheme kgw``: any scheme with a key writes, streams one event per
    sentence, names its key and detects, through the one Watermark interface."""
    from samark.schemes import create_scheme

    kgw = create_scheme("kgw", key=mpnet_key)
    settings = ServeSettings(tokens=frozenset({USER}), default_sentences=2, max_sentences=3)
    with served_app(scheme_app(kgw, settings)) as base:
        client = _client(base)
        prompt = "The city council met on Monday to discuss the budget."
        done = client.completions.create(model="samark", prompt=prompt, seed=5)
        chunks = list(client.completions.create(model="samark", prompt=prompt, seed=5, stream=True))
        status, found = _post(base, "/v1/detect", {"text": done.choices[0].text})
        health = json.loads(urllib.request.urlopen(f"{base}/healthz", timeout=30).read())
    SEEN.extend([done.model_dump_json(), *(c.model_dump_json() for c in chunks)])
    assert done.choices[0].text.strip() and done.model_extra["samark"]["key_id"] == mpnet_key.key_id
    streamed = "".join(c.choices[0].text for c in chunks)
    assert streamed.strip() == done.choices[0].text  # the same seed, sentence by sentence
    assert len([c for c in chunks if c.choices[0].text]) == 2
    assert status == 200 and found["unit"] == "token" and 0 < found["p_value"] <= 1
    assert health["scheme"] == "kgw" and health["embedder"] is None


def test_upstream_down_or_slow_is_502_or_504_and_serving_goes_on(
    mpnet, mpnet_key, free_port, served_app
) -> None:
    silent = socket.socket()  # accepts connections, never answers: a stalled upstream
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    slow_url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
    for url, status, words in (
        (f"http://127.0.0.1:{free_port()}/v1", 502, "unreachable"),
        (slow_url, 504, "longer than"),
    ):
        sampler = OpenAICompletionsEngine(url, "m", max_retries=0, timeout=8)
        scheme = SAMark(mpnet_key, config=CONFIG, embedder=mpnet, engine=sampler)
        settings = ServeSettings(auth=False, request_timeout_s=2, default_sentences=1)
        with served_app(scheme_app(scheme, settings)) as base:
            for stream in (False, True):
                got, body = _post(base, "/v1/completions", {"prompt": "Hi.", "stream": stream})
                assert got == status and words in body["error"]["message"], body
            assert _get(base, "/healthz")[0] == 200
            assert _post(base, "/v1/detect", {"text": HUMAN})[0] == 200
    silent.close()


@pytest.mark.slow
def test_a_keyring_server_writes_payloads_and_detects_against_every_key(ringed) -> None:
    base, ring = ringed
    client = _client(base)
    prompt = "The city council met on Monday to discuss the budget."
    plain = client.completions.create(model="samark", prompt=prompt, seed=4)
    assert plain.model_extra["samark"] == {
        "key_id": ring.entry("tenant-b").key_id,
        "key_label": "tenant-b",
    }
    coded = client.completions.create(
        model="samark", prompt=prompt, seed=4, extra_body={"payload": 0}
    )
    assert coded.model_extra["samark"] == {
        "key_id": ring.entry("tenant-a").key_id,
        "key_label": "tenant-a",
        "payload": 0,
    }
    SEEN.extend([plain.model_dump_json(), coded.model_dump_json()])
    with pytest.raises(openai.BadRequestError, match=r"0\.\.1"):
        client.completions.create(model="samark", prompt=prompt, extra_body={"payload": 2})
    status, found = _post(base, "/v1/detect", {"text": HUMAN})
    assert status == 200 and found["ring_keys"] == 2 and found["ring_method"] == "max-statistic"
    assert 0 < found["p_value"] <= 1 and found["key_p_value"] <= found["p_value"]
    if not found["is_watermarked"]:
        assert found["key_label"] is None and found["payload"] is None
    assert any("key " + ring.entry("tenant-a").key_id in line for line in SEEN)  # the log


def test_a_public_endpoint_can_answer_the_decision_only(mpnet_key, served_app) -> None:
    """``serve --detect-output decision --detect-budget 15``: a caller without an admin token
    learns whether a text is marked, not its p-value (a forger's gradient), for at most 15
    sentences an hour (three texts of five); an admin still gets it all, without a budget."""
    from samark.schemes import create_scheme

    kgw = create_scheme("kgw", key=mpnet_key)
    settings = ServeSettings(
        tokens=frozenset({USER}),
        admin_tokens=frozenset({ADMIN}),
        detect_output="decision",
        detect_budget=15,
    )
    with served_app(scheme_app(kgw, settings)) as base:
        status, user = _post(base, "/v1/detect", {"texts": [HUMAN, HUMAN]})
        _, admin = _post(base, "/v1/detect", {"text": HUMAN}, token=ADMIN)
        # the budget: 15 sentences an hour per token, HUMAN is 5; 10 spent, 10 more refused
        # (nothing counted), 5 more answered; admin tokens are not counted
        over, refused = _post(base, "/v1/detect", {"texts": [HUMAN, HUMAN]})
        last, _ = _post(base, "/v1/detect", {"text": HUMAN})
        again, _ = _post(base, "/v1/detect", {"text": HUMAN})
        admin_again, _ = _post(base, "/v1/detect", {"text": HUMAN}, token=ADMIN)
    assert (over, last, again, admin_again) == (429, 200, 429, 200)
    assert refused["error"]["code"] == "detect_budget" and "15 sentences an hour" in str(refused)
    assert status == 200 and len(user["data"]) == 2
    for answer in user["data"]:
        assert set(answer) <= {"scheme", "is_watermarked", "alpha", "n_units", "unit", "key_id"}
        assert answer["is_watermarked"] is False and answer["n_units"] > 0
    assert 0 < admin["p_value"] <= 1 and "statistic" in admin
    with pytest.raises(SamarkError, match="detect_output"):
        ServeSettings(auth=False, detect_output="p")  # type: ignore[arg-type]
    with pytest.raises(SamarkError, match="detect_budget"):
        ServeSettings(auth=False, detect_budget=0)


def test_the_detection_budget_is_a_sliding_hour() -> None:
    from samark.serving.access import Caller, DetectBudget
    from samark.serving.errors import ApiError

    now = [0.0]
    budget = DetectBudget(2, clock=lambda: now[0])
    a, b = Caller(admin=False, id="a"), Caller(admin=False, id="b")
    budget.charge(a, 2)
    budget.charge(b, 1)  # each caller has its own
    with pytest.raises(ApiError):
        budget.charge(a, 1)
    now[0] = 3599.0
    with pytest.raises(ApiError):
        budget.charge(a, 1)
    now[0] = 3600.5  # the first two have left the window
    budget.charge(a, 2)


def test_settings_refuse_weak_setups() -> None:
    with pytest.raises(SamarkError, match="no API token"):
        ServeSettings()
    with pytest.raises(SamarkError, match="at least 16"):
        ServeSettings(tokens=frozenset({"short"}))
    with pytest.raises(SamarkError, match="max_sentences"):
        ServeSettings(auth=False, default_sentences=5, max_sentences=2)


def test_the_key_never_appears_in_responses_or_logs(mpnet_key, key_forms) -> None:
    assert len(SEEN) > 20  # the module's other tests ran and were recorded
    for secret in [mpnet_key._secret, *RING_SECRETS]:
        for line in SEEN:
            for form in key_forms(secret):
                assert form not in line
