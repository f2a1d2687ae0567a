"""The SQLite record's approximate index (faiss IVF-SQ8): it finds what the exact search
finds for verbatim sentences of real embeddings, is used only from its threshold on,
follows inserts and deletions (an erasure reaches its file), is replayed from the record
and rebuilt where its file is stale, damaged or another record's, and is built by
``samark record index``."""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

pytest.importorskip("faiss")

from samark.cli import app
from samark.provenance import ivf_index
from samark.provenance.entries import RecordEntry
from samark.provenance.ivf_index import SentenceIndex
from samark.provenance.sqlite_store import SqliteStore
from samark.provenance.store import StoreBinding

CALIBRATION = Path(__file__).parent / "data" / "calibration_embeddings.npz"
BINDING = StoreBinding("rk" * 32, "all-mpnet-base-v2", "e" * 64, 768)


@pytest.fixture(scope="module")
def real() -> np.ndarray:
    """The distinct ones of 7,688 real all-mpnet-base-v2 embeddings of human sentences
    (news, Wikipedia, Austen, the Debian handbook), unit rows, in their order: a row
    within cosine 0.9999 of an earlier one (the same sentence twice) is left out, since
    the exact search itself may answer either copy."""
    with np.load(CALIBRATION) as data:
        rows = np.concatenate(
            [data[k] for k in sorted(data.files) if k.endswith("/embeddings")]
        ).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    twice = np.zeros(len(rows), dtype=bool)
    for start in range(0, len(rows), 2048):
        cos = rows[start : start + 2048] @ rows[: start + 2048].T
        cos[np.arange(len(cos)), start + np.arange(len(cos))] = 0  # itself
        earlier = np.tril(np.ones_like(cos, dtype=bool), k=start - 1)
        twice[start : start + 2048] = ((cos > 0.9999) & earlier).any(axis=1)
    assert 7000 < (~twice).sum() < len(rows)
    return rows[~twice]


def _entries(rows: np.ndarray, first: int = 0) -> list[RecordEntry]:
    now = datetime.now(UTC)
    return [
        RecordEntry(os.urandom(32), r, f"req{(first + i) // 10}", "k1", now)
        for i, r in enumerate(rows)
    ]


def _filled(path: Path, rows: np.ndarray, **kw) -> SqliteStore:
    store = SqliteStore(str(path), BINDING, **kw)
    for start in range(0, len(rows), 2000):
        store.add(_entries(rows[start : start + 2000], start))
    return store


def _top1(store: SqliteStore, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    found = store.nearest(queries, k=1)
    return (
        np.array([n[0].sentence.row for n in found]),
        np.array([n[0].cosine for n in found]),
    )


def test_index_finds_what_exact_search_finds_for_verbatim_sentences(tmp_path, real) -> None:
    exact = _filled(tmp_path / "exact.db", real, index_threshold=None)
    indexed = _filled(tmp_path / "indexed.db", real, index_threshold=1000)
    with exact, indexed:
        queries = real[::2]  # half of them (the search's cost), spread over the record
        rows_e, cos_e = _top1(exact, queries)
        rows_i, cos_i = _top1(indexed, queries)
        assert indexed.index.index is not None  # the index answered, not the matrix
        assert indexed.index.path.exists()
        assert exact.index.index is None and not exact.index.path.exists()
        # every sentence found in its own row, with the exact search's cosine
        assert rows_e.tolist() == list(range(1, len(real) + 1, 2))
        assert rows_i.tolist() == rows_e.tolist()
        np.testing.assert_allclose(cos_i, cos_e, atol=1e-6)
        # several neighbours: highest first, each with its exact stored cosine
        many = indexed.nearest(real[:20], k=5)
        truth = exact.nearest(real[:20], k=5)
        for got, want in zip(many, truth, strict=True):
            cos = [n.cosine for n in got]
            assert cos == sorted(cos, reverse=True) and len(got) == 5
            assert got[0].cosine == pytest.approx(want[0].cosine, abs=1e-5)


def test_answers_below_the_threshold_do_not_change(tmp_path, real) -> None:
    rows = real[:3000]
    exact = _filled(tmp_path / "exact.db", rows, index_threshold=None)
    below = _filled(tmp_path / "below.db", rows)  # the default threshold (100,000)
    queries = real[3000:3100]  # other sentences: near, not verbatim
    with exact, below:
        want = exact.nearest(queries, k=3)
        got = below.nearest(queries, k=3)
        assert not below.index.path.exists()
        # an index built ahead is kept in step, but not searched below its threshold
        below.build_index()
        assert below.index.path.exists()
        assert below.nearest(queries, k=3) == got
    for g, w in zip(got, want, strict=True):
        assert [n.sentence.row for n in g] == [n.sentence.row for n in w]
        assert [n.cosine for n in g] == pytest.approx([n.cosine for n in w], abs=1e-6)


def test_index_follows_inserts_and_replays_what_its_file_lacks(tmp_path, real) -> None:
    path = tmp_path / "r.db"
    with _filled(path, real[:3000], index_threshold=1000) as store:
        store.nearest(real[:1], k=1)  # builds the index, writes its file
        written = store.index.index
        assert written is not None and written.last_id == 3000
        store.add(_entries(real[3000:3500], 3000))  # a loaded index follows at once
        assert len(written) == 3500 and written.unsaved == 500
        assert _top1(store, real[3000:3500])[0].tolist() == list(range(3001, 3501))
    # close wrote it; another process (no index loaded) adds more; the next opens replay
    header = SentenceIndex.load(path.with_name("r.db.index"), 768, ivf_index_owner())
    assert header is not None and header.last_id == 3500
    with SqliteStore(str(path), BINDING, index_threshold=None) as writer:
        writer.add(_entries(real[3500:4000], 3500))
    with SqliteStore(str(path), BINDING, index_threshold=1000) as store:
        rows, _ = _top1(store, real[3500:4000])
        assert store.index.index is not None and len(store.index.index) == 4000
        assert rows.tolist() == list(range(3501, 4001))


def ivf_index_owner() -> str:
    from samark.provenance.sqlite_index import owner

    return owner(BINDING)


def test_deletions_reach_the_index_and_its_file(tmp_path, real) -> None:
    path = tmp_path / "r.db"
    with _filled(path, real[:3000], index_threshold=1000) as store:
        store.build_index()
        assert store.delete_request("req7") == 10  # rows 71..80
    on_disk = SentenceIndex.load(path.with_name("r.db.index"), 768, ivf_index_owner())
    assert on_disk is not None and len(on_disk) == 2990
    assert not set(range(71, 81)) & set(on_disk.ids().tolist())
    # a deletion by a process that never loaded the index (a keyless prune)
    with SqliteStore(str(path), None) as keyless:
        assert keyless.delete_request("req8") == 10
    on_disk = SentenceIndex.load(path.with_name("r.db.index"), 768, ivf_index_owner())
    assert on_disk is not None and len(on_disk) == 2980
    assert not set(range(81, 91)) & set(on_disk.ids().tolist())
    with SqliteStore(str(path), BINDING, index_threshold=1000) as store:
        rows, _ = _top1(store, real[70:90])
        assert not set(rows.tolist()) & set(range(71, 91))


def test_without_faiss_search_is_exact_and_a_deletion_drops_the_file(
    tmp_path, real, monkeypatch
) -> None:
    path = tmp_path / "r.db"
    with _filled(path, real[:2000], index_threshold=1000) as store:
        store.build_index()
    monkeypatch.setitem(sys.modules, "faiss", None)  # `import faiss` fails
    with SqliteStore(str(path), BINDING, index_threshold=1000) as store:
        rows, _ = _top1(store, real[:50])
        assert store.index.index is None  # the exact search answered
        assert rows.tolist() == list(range(1, 51))
        store.delete_request("req0")
        assert not path.with_name("r.db.index").exists()  # the erasure holds


@pytest.mark.parametrize("damage", ["truncated", "other record", "garbage"])
def test_a_stale_or_damaged_index_file_is_rebuilt(tmp_path, real, damage) -> None:
    path = tmp_path / "r.db"
    index_file = path.with_name("r.db.index")
    with _filled(path, real[:2000], index_threshold=1000) as store:
        store.build_index()
    data = index_file.read_bytes()
    if damage == "truncated":
        index_file.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        index_file.write_bytes(b"\x00" * 100)
    else:
        other = StoreBinding("xy" * 32, "all-mpnet-base-v2", "e" * 64, 768)
        with _filled(tmp_path / "other.db", real[:1500], index_threshold=1000) as _:
            pass
        with SqliteStore(str(tmp_path / "other.db"), None) as o:
            o.build_index()
        assert other != BINDING
        index_file.write_bytes(tmp_path.joinpath("other.db.index").read_bytes())
    with SqliteStore(str(path), BINDING, index_threshold=1000) as store:
        rows, _ = _top1(store, real[:2000])
        assert len(store.index.index or []) == 2000
        assert rows.tolist() == list(range(1, 2001))
    assert SentenceIndex.load(index_file, 768, ivf_index_owner()) is not None
    assert index_file.stat().st_mode & 0o777 == 0o600


def test_cli_builds_the_index_with_progress(tmp_path, real) -> None:
    path = tmp_path / "r.db"
    with _filled(path, real[:2500]) as _:
        pass
    runner = CliRunner()
    result = runner.invoke(app, ["record", "index", f"sqlite:///{path}"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["indexed"] == 2500 and out["threshold"] == 100_000
    assert out["bytes"] == path.with_name("r.db.index").stat().st_size
    assert "indexing" in result.stderr and "indexed 2500 sentences" in result.stderr
    missing = runner.invoke(app, ["record", "index", str(tmp_path / "none.db")])
    assert missing.exit_code == 2 and "there is no record" in missing.stderr
    empty = tmp_path / "empty.db"
    SqliteStore(str(empty), BINDING).close()
    nothing = runner.invoke(app, ["record", "index", str(empty)])
    assert nothing.exit_code == 2 and "empty" in nothing.stderr


def test_lists_grow_with_the_record() -> None:
    assert ivf_index.lists_for(10_000) == 512
    assert ivf_index.lists_for(200_000) == 2048
    assert ivf_index.lists_for(10_000_000) == ivf_index.MAX_LISTS == 4096
