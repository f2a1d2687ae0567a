"""``samark serve --record``: two servers on one record (SQLite, and a real PostgreSQL with
pgvector), concurrent clients generating through the API, every served sentence
recorded under its completion's id, and an admin's detection reporting each sentence as
served (or not); configurations that cannot record refused before anything loads."""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

pytest.importorskip("fastapi", reason="serving needs samark[server]")
pytest.importorskip("uvicorn", reason="serving needs samark[server]")

from samark.cli import app as cli
from samark.errors import SamarkError
from samark.keys import EmbedderIdentity, WatermarkKey
from samark.provenance import ProvenanceRecord
from samark.segment import split_sentences
from samark.serving import ServerConfig, ServeSettings, create_app

USER = "record-user-token-0123456789"
ADMIN = "record-admin-token-0123456789"
ACCESS = ServeSettings(
    tokens=frozenset({USER}), admin_tokens=frozenset({ADMIN}), default_sentences=2, max_sentences=2
)
HUMAN = "The harbour authority closed the eastern pier for repairs until the end of March."


@pytest.fixture(params=["sqlite", "postgresql"])
def record_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/served.db"
    return str(request.getfixturevalue("postgres_url"))


def _streamed(base: str, body: dict[str, Any]) -> tuple[str, str]:
    """A streamed completion's id and text (its server-sent events joined)."""
    request = urllib.request.Request(
        base + "/v1/completions",
        data=json.dumps({**body, "stream": True}).encode(),
        headers={"Authorization": f"Bearer {USER}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=600) as response:
        events = [
            json.loads(line[6:])
            for line in response.read().decode().splitlines()
            if line.startswith("data: {")
        ]
    return events[0]["id"], "".join(e["choices"][0]["text"] for e in events)


@pytest.mark.slow
def test_servers_record_what_they_serve_and_detection_reports_it(
    record_url: str, mpnet_key, mpnet, smollm2, served_app, post_json
) -> None:
    sqlite = record_url.startswith("sqlite")
    store_text = sqlite  # the text kept on one backend only
    config = ServerConfig(
        key=mpnet_key, scheme="kgw", access=ACCESS, record=record_url, store_text=store_text
    )
    with contextlib.ExitStack() as stack:
        a = stack.enter_context(served_app(create_app(config)))
        # PostgreSQL: two replicas on one record
        b = a if sqlite else stack.enter_context(served_app(create_app(config)))
        bodies = [
            (a, {"prompt": "The city council met on Monday to discuss the budget.", "seed": 1}),
            (b, {"prompt": "Heavy rain fell across the region overnight.", "seed": 2}),
        ][: 1 if sqlite else 2]
        with ThreadPoolExecutor(3) as pool:  # clients at once, on both servers
            streamed = pool.submit(_streamed, b, {"prompt": "The museum reopened.", "seed": 3})
            answers = list(
                pool.map(lambda x: post_json(x[0], "/v1/completions", x[1], USER), bodies)
            )
            made = [(m["id"], m["choices"][0]["text"]) for status, m in answers if status == 200]
            made.append(streamed.result())
        assert len(made) == len(bodies) + 1, answers
        # an admin's detection reads the record: each text's sentences, under its request
        edited = f"{made[0][1].strip()} {HUMAN}"
        texts = [text for _, text in made] + [edited]
        status, found = post_json(b, "/v1/detect", {"texts": texts, "details": True}, ADMIN)
        assert status == 200, found
        for (request_id, text), result in zip(made, found["data"], strict=False):
            provenance = result["provenance"]
            states = {s["state"] for s in provenance["sentences"]}
            assert states == {"served"} and provenance["requests"] == [request_id], provenance
            assert len(provenance["sentences"]) == len(split_sentences(text))
            match = provenance["sentences"][0]["match"]
            assert ("text" in match) is store_text and match["key_id"] == mpnet_key.key_id
        last = found["data"][-1]["provenance"]
        assert last["sentences"][-1]["state"] == "not_served"  # the sentence added
        assert last["requests"] == [made[0][0]]
        # a caller without an admin token learns nothing of the record
        status, plain = post_json(a, "/v1/detect", {"text": made[0][1]}, USER)
        assert status == 200 and "provenance" not in plain
    with ProvenanceRecord.open(record_url, mpnet_key, mpnet) as record:
        # each sentence as it was sent (at most max_sentences a request), and as the
        # joined text splits where that differs (two joined without a space): nothing else
        sentences = sum(len(split_sentences(text)) for _, text in made)
        assert sentences <= record.store.count() <= sentences + 2 * len(made)


def test_a_server_that_cannot_record_is_refused_before_anything_loads(tmp_path) -> None:
    for fields, message in [
        ({"key": "k", "store_text": True}, "store_text keeps the served text in a record"),
        ({"keyring": "ring", "record": "r.db"}, "a keyring's record is not supported yet"),
        ({"key": "k", "record": "redis://host/0"}, "unknown record URL scheme 'redis'"),
        ({"key": "k", "record": "sqlite://u:s3cret@h/x.db"}, r"sqlite://u:\*\*\*@h/x.db"),
    ]:
        with pytest.raises(SamarkError, match=message) as refused:
            ServerConfig(access=ACCESS, **fields)
        assert "s3cret" not in str(refused.value)
    key = WatermarkKey.generate(EmbedderIdentity("all-mpnet-base-v2", "ab" * 32))
    key_file = key.save(tmp_path / "k.key")
    runner = CliRunner()
    for args, message in [
        (["--store-text"], "--store-text stores the text in a --record"),
        (["--record", "postgresql://u:s3cret@h:notaport/db?x"], "not a PostgreSQL connection"),
    ]:
        result = runner.invoke(cli, ["serve", "--key", str(key_file), "--no-auth", *args])
        assert result.exit_code == 2 and message in result.output, result.output
        assert "s3cret" not in result.output


def test_a_record_that_cannot_be_read_or_written_answers_503(
    tmp_path, minilm, served_app, post_json
) -> None:
    """The record gone under a running server (SQLite here; a database down is the same
    error): a generation is refused before any sentence is sent, and an admin's detection
    with details is 503 record_unavailable, not a bare 500; without details nothing reads
    the record."""
    from samark.schemes import create_scheme
    from samark.serving.app import scheme_app

    # a fixed key, so that the completion below writes a sentence: with a random key it
    # once ended at its token budget with none (the suite, 2026-11-27), so there was
    # nothing to record and it answered 200, rightly
    key = WatermarkKey(b"record-unavailable".ljust(32, b"0"), minilm.identity)
    record = ProvenanceRecord.open(f"sqlite:///{tmp_path}/served.db", key, minilm)
    with served_app(scheme_app(create_scheme("kgw", key=key), ACCESS, record=record)) as base:
        record.close()
        status, refused = post_json(base, "/v1/detect", {"text": HUMAN, "details": True}, ADMIN)
        assert status == 503 and refused["error"]["code"] == "record_unavailable", refused
        status, plain = post_json(base, "/v1/detect", {"text": HUMAN}, USER)
        assert status == 200 and "provenance" not in plain
        body = {"prompt": "The museum reopened.", "seed": 3, "max_sentences": 1}
        status, refused = post_json(base, "/v1/completions", body, USER)
        assert status == 503 and refused["error"]["code"] == "record_unavailable", refused


def test_a_config_shows_no_password_nor_token_in_its_repr() -> None:
    """A config logged or printed (a traceback, a debug line) holds the record URL's
    password and the API tokens only where they are read, never in its repr."""
    config = ServerConfig(
        access=ACCESS, key="k.key", record="postgresql://u:s3cret@db.internal/records"
    )
    assert config.record is not None and "s3cret" in config.record
    for shown in (repr(config), str(config)):
        assert "s3cret" not in shown and USER not in shown and ADMIN not in shown
