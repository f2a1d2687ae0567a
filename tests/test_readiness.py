"""Ready means ready (issue 56): ``/readyz`` answers 503 until the models are loaded and
warm and while the record cannot be read, ``/healthz`` stays the liveness probe; a new
record file is readable by its owner alone; an empty batch is an error with a code."""

from __future__ import annotations

import json
import stat
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="`samark serve` needs samark[server]")
pytest.importorskip("uvicorn", reason="`samark serve` needs samark[server]")

from samark.serving import ServeSettings, scheme_app
from samark.serving.worker import Worker

USER = "user-token-0123456789abcdef"


def _call(base: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{base}{path}", data=data)
    request.add_header("authorization", f"Bearer {USER}")
    request.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture(scope="module")
def kgw(mpnet_key):
    from samark.schemes import create_scheme

    return create_scheme("kgw", key=mpnet_key)


def test_readiness_waits_for_warm_models_and_a_readable_record(kgw, mpnet, tmp_path) -> None:
    from samark.provenance import ProvenanceRecord
    from samark.schemes import create_scheme

    record = ProvenanceRecord.open(f"sqlite:///{tmp_path / 'served.db'}", kgw.key, mpnet)
    # a new record file is personal data: owner-only, as the key file is
    assert stat.S_IMODE((tmp_path / "served.db").stat().st_mode) == 0o600
    scheme = create_scheme("kgw", key=kgw.key)
    worker = Worker(scheme, ServeSettings(tokens=frozenset({USER})), record=record)
    state = worker.readiness()
    assert state == {"ready": False, "checks": {"models": False, "record": True}}
    worker.warm()
    assert worker.readiness() == {"ready": True, "checks": {"models": True, "record": True}}
    record.close()  # the record can no longer be read: not ready
    assert worker.readiness()["checks"]["record"] is False
    assert worker.readiness()["ready"] is False
    worker.close()


def test_readyz_turns_ready_once_warm_and_an_empty_batch_is_refused(kgw, served_app) -> None:
    settings = ServeSettings(tokens=frozenset({USER}))
    with served_app(scheme_app(kgw, settings)) as base:
        status, alive = _call(base, "/healthz")
        assert status == 200 and alive["status"] == "ok"  # liveness answers at once
        deadline = time.monotonic() + 300
        while True:
            status, ready = _call(base, "/readyz")
            if status == 200 or time.monotonic() > deadline:
                break
            assert status == 503 and ready["status"] == "not_ready", ready
            time.sleep(0.5)
        assert status == 200 and ready == {
            "status": "ready",
            "ready": True,
            "checks": {"models": True},
        }
        status, body = _call(base, "/v1/detect", {"texts": []})
        assert status == 400 and body["error"]["code"] == "empty_batch"
        assert "at least one text" in body["error"]["message"]


def test_an_existing_record_file_keeps_its_mode(kgw, mpnet, tmp_path: Path) -> None:
    from samark.provenance import ProvenanceRecord

    path = tmp_path / "shared.db"
    ProvenanceRecord.open(f"sqlite:///{path}", kgw.key, mpnet).close()
    path.chmod(0o640)  # an operator's own choice stays
    ProvenanceRecord.open(f"sqlite:///{path}", kgw.key, mpnet).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


# -- fair under load -------------------------------------------------------------------------
def test_detection_units_group_texts_up_to_a_units_sentences() -> None:
    from samark.serving.scheduling import detection_units

    # five texts of 3, 3, 3, 20 and 3 sentences, by index
    units = detection_units([3, 3, 3, 20, 3], sentences=7)
    assert units == [[0, 1], [2], [3], [4]]


def test_a_small_check_is_not_held_up_by_a_large_batch(minilm) -> None:
    """A batch of 12 ten-sentence texts and a one-sentence check sent just after it: the
    small check is answered long before the batch, and each answer is what it is alone."""
    import asyncio

    from samark.embed import new_key
    from samark.schemes import create_scheme
    from samark.serving.admission import admit_request

    scheme = create_scheme("samark", key=new_key(minilm, cells=0), embedder=minilm)
    worker = Worker(scheme, ServeSettings(tokens=frozenset({USER})))
    sentences = [f"Report {i} says the river rose by {i} metres overnight." for i in range(10)]
    batch = [" ".join(sentences[i:] + sentences[:i]) for i in range(12)]
    small = "The mayor asked residents to stay calm."
    finished: list[str] = []

    async def both() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        async def tagged(name: str, texts: list[str]) -> list[dict[str, Any]]:
            result = await worker.detect(admit_request(texts, worker.settings), False)
            finished.append(name)
            return result

        large = asyncio.create_task(tagged("large", batch))
        await asyncio.sleep(0.05)  # the batch is queued and running first
        return await asyncio.gather(large, tagged("small", [small]))

    large, one = asyncio.run(both())
    assert finished == ["small", "large"]
    assert len(large) == 12 and all("p_value" in r for r in large)
    alone = asyncio.run(worker.detect(admit_request([small], worker.settings), False))
    assert one[0]["p_value"] == pytest.approx(alone[0]["p_value"], abs=2e-3)
    worker.close()


def test_a_request_over_the_sentence_caps_is_refused(kgw, served_app) -> None:
    settings = ServeSettings(
        tokens=frozenset({USER}), max_text_sentences=6, max_detect_sentences=10
    )
    four = "One sentence. Two sentences. Three sentences. Four sentences."
    with served_app(scheme_app(kgw, settings)) as base:
        status, body = _call(base, "/v1/detect", {"text": four + " Five. Six. Seven."})
        assert status == 413 and body["error"]["code"] == "text_too_long"
        assert "7 sentences; at most 6" in body["error"]["message"]
        status, body = _call(base, "/v1/detect", {"texts": [four, four, four]})
        assert status == 413 and body["error"]["code"] == "too_many_sentences"
        assert "12 sentences in one request; at most 10" in body["error"]["message"]
        status, body = _call(base, "/v1/detect", {"texts": [four, four]})
        assert status == 200 and len(body["data"]) == 2


def test_the_priority_executor_runs_small_units_first_then_in_order() -> None:
    import threading as th

    from samark.serving.scheduling import LARGE, SMALL, PriorityExecutor

    pool = PriorityExecutor()
    gate = th.Event()
    ran: list[str] = []
    first = pool.submit_at(LARGE, gate.wait)  # holds the thread while the rest queue
    futures = [
        pool.submit_at(LARGE, lambda: ran.append("large-1")),
        pool.submit_at(LARGE, lambda: ran.append("large-2")),
        pool.submit_at(SMALL, lambda: ran.append("small")),
        pool.submit(lambda: ran.append("large-3")),
    ]
    failing = pool.submit_at(SMALL, lambda: 1 / 0)
    gate.set()
    first.result(timeout=10)
    for f in futures:
        f.result(timeout=10)
    assert ran == ["small", "large-1", "large-2", "large-3"]
    with pytest.raises(ZeroDivisionError):
        failing.result(timeout=10)
    pool.shutdown()
    with pytest.raises(RuntimeError):
        pool.submit(lambda: None)


def test_errors_are_in_our_words_each_with_a_code(kgw, served_app) -> None:
    settings = ServeSettings(tokens=frozenset({USER}))
    with served_app(scheme_app(kgw, settings)) as base:
        status, body = _call(base, "/v1/detect", {"text": "One.", "texts": ["Two."]})
        assert status == 400 and body["error"]["code"] == "invalid_body"
        assert body["error"]["message"] == "give exactly one of 'text' and 'texts'"
        status, body = _call(base, "/v1/nothing-here")
        assert status == 404 and body["error"]["code"] == "not_found"
        request = urllib.request.Request(f"{base}/v1/detect", data=b"\x00\xff\xfe binary")
        request.add_header("authorization", f"Bearer {USER}")
        try:
            urllib.request.urlopen(request, timeout=60)
            raise AssertionError("a binary body was accepted")
        except urllib.error.HTTPError as exc:
            error = json.loads(exc.read())["error"]
            assert exc.code == 400 and error["code"] is not None, error


def test_readiness_checks_a_remote_engine(minilm, free_port) -> None:
    """A scheme that draws from an OpenAI-compatible server is ready only while the server
    answers; a local engine has no such check."""
    from samark.embed import new_key
    from samark.sampling.openai_server import OpenAICompletionsEngine
    from samark.schemes import create_scheme

    key = new_key(minilm, cells=0)
    down = OpenAICompletionsEngine(f"http://127.0.0.1:{free_port()}/v1", "m", max_retries=0)
    remote = create_scheme("samark", key=key, embedder=minilm, engine=down)
    worker = Worker(remote, ServeSettings(tokens=frozenset({USER})))
    worker.warm()
    assert worker.readiness() == {"ready": False, "checks": {"models": True, "engine": False}}
    worker.close()


def test_a_request_refused_by_the_body_limit_counts_under_its_route(kgw, served_app) -> None:
    settings = ServeSettings(tokens=frozenset({USER}), max_body_bytes=2_000)
    with served_app(scheme_app(kgw, settings)) as base:
        status, body = _call(base, "/v1/detect", {"text": "x " * 5_000})
        assert status == 413 and body["error"]["code"] == "too_large"
        assert "larger than this server takes (2 kB)" in body["error"]["message"]
        with urllib.request.urlopen(f"{base}/metrics", timeout=30) as response:
            metrics = response.read().decode()
    assert 'route="/v1/detect",status="413"' in metrics
    assert 'route="unmatched",status="413"' not in metrics
