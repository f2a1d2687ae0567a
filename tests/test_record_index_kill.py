"""A SIGKILL while the record is recording, writing its index or rebuilding it loses
nothing: real subprocesses are killed at random moments; the index file left behind is
whole (replaced atomically), and on reopen the index holds exactly the record's rows,
each found again. Small synthetic vectors: the point is durability, not search."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("faiss")

from samark.provenance.ivf_index import SentenceIndex
from samark.provenance.sqlite_index import owner
from samark.provenance.sqlite_store import SqliteStore
from samark.provenance.store import StoreBinding

SRC = Path(__file__).resolve().parents[1] / "src"
DIM = 16
BINDING = StoreBinding("rk" * 32, "toy", "f" * 64, DIM)
CHILD = textwrap.dedent(
    """
    import os, sys
    from datetime import UTC, datetime
    import numpy as np
    from samark.provenance import ivf_index
    from samark.provenance.entries import RecordEntry
    from samark.provenance.sqlite_store import SqliteStore
    from samark.provenance.store import StoreBinding

    ivf_index.SAVE_MIN, ivf_index.SAVE_FRACTION = 60, 0.0  # write the file very often
    path, mode, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    binding = StoreBinding("rk" * 32, "toy", "f" * 64, 16)
    store = SqliteStore(path, binding, index_threshold=50)
    rng = np.random.default_rng(seed)
    while True:
        if mode == "build":
            store.build_index()
            print("built", flush=True)
            continue
        rows = rng.standard_normal((37, 16))
        now = datetime.now(UTC)
        store.add([RecordEntry(os.urandom(32), r, "req", "k", now) for r in rows])
        store.nearest(rows[:1], k=1)  # catches the index up, writes it when due
        print("committed", store.count(), flush=True)
    """
)


def _run_and_kill(script: Path, db: Path, mode: str, seed: int, lines: int) -> int:
    """Start a child, let it print ``lines`` lines, SIGKILL it a random moment later;
    the last count it reported committed (0 for a build)."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    child = subprocess.Popen(
        [sys.executable, str(script), str(db), mode, str(seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    last = 0
    deadline = time.monotonic() + 60
    for _ in range(lines):
        line = child.stdout.readline()
        if not line:
            child.wait()
            raise AssertionError(f"the child died: {child.stderr.read() if child.stderr else ''}")
        if line.startswith("committed"):
            last = int(line.split()[1])
        assert time.monotonic() < deadline
    time.sleep(random.uniform(0.0, 0.15))
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL
    child.stdout.close()
    if child.stderr is not None:
        child.stderr.close()
    return last


def test_sigkill_while_recording_and_indexing_loses_nothing(tmp_path) -> None:
    random.seed(67)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    db = tmp_path / "record.db"
    index_file = db.with_name("record.db.index")
    committed = 0
    for round_ in range(3):  # recording: inserts, index updates and its writes
        committed = max(committed, _run_and_kill(script, db, "record", round_, 6 + 4 * round_))
    assert index_file.exists()
    _run_and_kill(script, db, "build", 0, 1)  # a rebuild from the record, killed
    committed = max(committed, _run_and_kill(script, db, "record", 9, 5))

    # the file left behind is whole: one of the complete versions written
    on_disk = SentenceIndex.load(index_file, DIM, owner(BINDING))
    assert on_disk is not None
    with SqliteStore(str(db), BINDING, index_threshold=50) as store:
        stored = store.scan(0, 1_000_000)
        assert len(stored) == store.count() >= committed > 200
        ids = np.array([row for row, _ in stored])
        vectors = np.stack([e.embedding for _, e in stored]).astype(np.float32)
        found = store.nearest(vectors, k=1)
        index = store.index.index
        assert index is not None  # the replayed index answered
        # it holds exactly the record's rows, and finds each of them
        assert sorted(index.ids().tolist()) == ids.tolist()
        assert [n[0].sentence.row for n in found] == ids.tolist()
        assert min(n[0].cosine for n in found) > 0.999
        # the file lacked what was recorded after its last write: replayed, not lost
        assert on_disk.last_id <= ids[-1]
