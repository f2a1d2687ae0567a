"""The PostgreSQL record's database server killed mid-write (issue 45).

The test suite kills a *writer* (tests/test_provenance.py, both backends). This kills the
*database server*: a PostgreSQL with pgvector (``pgserver``) in a new folder, writer
processes appending requests of 20 sentences in a loop and printing each request's
number once ``add`` has returned, then SIGKILL to every process of the server (the
postmaster and its backends, as the OOM killer or a power cut would end them) while they
write. The server is started again on the same data (crash recovery from its write-ahead
log) and checked: every request a writer saw committed is there whole, no request is
there in part, and the record takes writes again.

    python benchmarks/studies/record_kill.py --writers 2 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

_WRITER = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime

    import numpy as np

    from samark.provenance import RecordEntry, StoreBinding, open_store

    url, tag = sys.argv[1], sys.argv[2]
    binding = StoreBinding("0" * 32, "synthetic", "synthetic", 768)
    rng = np.random.default_rng(abs(hash(tag)) % 2**32)
    store = open_store(url, binding)
    i = 0
    while True:
        v = rng.standard_normal((20, 768))
        store.add(
            [
                RecordEntry(f"{tag}-{i}-{j}".encode().ljust(32, b"."), v[j], f"{tag}-{i}",
                            "synthetic", datetime.now(UTC))
                for j in range(20)
            ]
        )
        print(i, flush=True)
        i += 1
    """
)


def _server_pids(pgdata: Path) -> list[int]:
    """The postmaster and its children."""
    postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
    children = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(postmaster)], capture_output=True, text=True
    ).stdout.split()
    return [postmaster, *map(int, children)]


def one_round(folder: Path, writers: int, commits: int, tag: str, before: int) -> dict[str, Any]:
    import numpy as np
    import pgserver

    from samark.provenance import RecordEntry, StoreBinding, open_store
    from samark.provenance.entries import utc_now

    pgdata = folder / "pgdata"
    server = pgserver.get_server(pgdata, cleanup_mode=None)
    url = server.get_uri()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, url, f"{tag}w{w}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for w in range(writers)
    ]
    seen: dict[str, list[int]] = {}
    for w, proc in enumerate(procs):
        assert proc.stdout is not None
        seen[f"{tag}w{w}"] = [int(proc.stdout.readline()) for _ in range(commits)]
    pids = _server_pids(pgdata)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    for w, proc in enumerate(procs):
        assert proc.stdout is not None
        # what each writer printed before the server died (its later adds fail)
        seen[f"{tag}w{w}"] += [int(x) for x in proc.stdout.read().split() if x.isdigit()]
        proc.kill()
        proc.wait()
    # a restart as after a crash; the stale pid and socket lock files go (as a reboot
    # clears them: a killed postmaster may linger as a zombie where no init reaps it,
    # and look alive to pgserver and PostgreSQL)
    pgserver.PostgresServer._instances.pop(pgdata.resolve(), None)
    for stale in (pgdata / "postmaster.pid", *pgdata.glob(".s.PGSQL.*.lock")):
        stale.unlink()
    start = time.perf_counter()
    server = pgserver.get_server(pgdata, cleanup_mode=None)  # crash recovery
    recovery_s = time.perf_counter() - start
    binding = StoreBinding("0" * 32, "synthetic", "synthetic", 768)
    with open_store(server.get_uri(), binding) as store:
        committed = [(tag, i) for tag, numbers in seen.items() for i in numbers]
        digests = [
            f"{tag}-{i}-{j}".encode().ljust(32, b".") for tag, i in committed for j in range(20)
        ]
        found = store.lookup(digests)
        missing = sum(1 for f in found if len(f) != 1)
        total = store.count() - before
        store.add(
            [RecordEntry(b"after".ljust(32, b"."), np.ones(768), f"{tag}-after", "s", utc_now())]
        )
        after = store.count()
    partial = total % 20
    return {
        "killed_processes": len(pids),
        "committed_requests_seen": len(committed),
        "round_sentences_stored": total,
        "committed_sentences_missing": missing,
        "requests_beyond_those_seen": (total - 20 * len(committed)) // 20,
        "partial_request_rows": partial,
        "recovery_s": round(recovery_s, 2),
        "writes_again": after == before + total + 1,
        "stored": after,
        "server": server,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--writers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="kills, each on the same data")
    ap.add_argument("--commits", type=int, default=30, help="requests each writer commits first")
    args = ap.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="samark-record-kill-"))
    server = None
    stored = 0
    try:
        for r in range(args.rounds):
            out = one_round(folder, args.writers, args.commits, f"r{r}", stored)
            server = out.pop("server")
            stored = out["stored"]
            print(json.dumps({"round": r + 1, **out}), flush=True)
    finally:
        if server is not None:
            server.cleanup_mode = "delete"
            server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
