"""The SQLite record's approximate index (issue 67), measured through the shipped store.

A real :class:`~samark.provenance.sqlite_store.SqliteStore` is filled with the haystack
of docs/results/2026-11-28-record-at-scale (its 8,506 real sentences, then its synthetic
rows: ``benchmarks.studies.record_at_scale.Haystack``, the same rows at the same seed),
``--size`` sentences, and its index is built by :meth:`SqliteStore.build_index` (what
``samark record index`` runs). Then, through ``store.nearest`` (the index's candidates
re-ranked by the stored rows, as served):

- **p50 / p99** of one query at a time (``--latency-queries`` real paraphrase queries,
  one thread, after a warm-up), beside the exact search of the same store (the search
  below the threshold) on the same queries;
- **recall@1** against the exact answer (the row of highest cosine over every stored
  row, float16 as stored; a tie at the exact cosine counts: some sentences are stored
  twice) on every real Doc-P and Doc-T paraphrase query (1,633), and how often the answer
  is the query's own source sentence at or above the record's threshold (0.905);
- **edited sentences** (``--edited``): the Word-S 15% and Word-D 5% (a copyedit: a few
  words dropped) attacks of the same 70 texts, embedded here once (cached in
  ``edited.npz``), scored the same way;
- **build time** (wall clock, one thread), **disk** (the record's file and the index's,
  bytes a sentence), and **memory** (the resident size a fresh process gains opening the
  record and answering its first search, and its peak).

Needs ``pip install 'samark[record-index]'`` and the study's ``prepare`` output
(``real.npz``) in ``--out``. Writes one JSON line to ``--out/record-index.jsonl``.

    OMP_NUM_THREADS=1 python -m benchmarks.studies.record_at_scale prepare --out record-at-scale
    OMP_NUM_THREADS=1 python -m benchmarks.record_index --out record-at-scale --size 200000 --edited
    OMP_NUM_THREADS=1 python -m benchmarks.record_index --out record-at-scale --size 10000000 \\
        --edited --exact-queries 0
    # again on the built record, to re-take latency in a quiet window (no fill, no build)
    OMP_NUM_THREADS=1 python -m benchmarks.record_index --out record-at-scale --size 10000000 \\
        --edited --exact-queries 0 --reuse
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.studies.record_at_scale import (
    ATTACKS,
    Haystack,
    latency,
    latency_queries,
    log,
    machine,
    stored_texts,
)

THRESHOLD = 0.905  # the record's default paraphrase threshold
EDITED = {"Word-S 15%": "word-s-15", "Word-D 5%": "word-d-5"}


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def binding() -> Any:
    from samark.provenance.store import StoreBinding

    return StoreBinding("benchmark", "all-mpnet-base-v2", "benchmark", 768)


def fill(db: Path, hay: Haystack, size: int) -> float:
    """The record filled with the first ``size`` haystack rows (random digests, 12
    sentences a request), in transactions of 20,000; seconds taken."""
    from samark.provenance.entries import RecordEntry
    from samark.provenance.sqlite_store import SqliteStore

    rng = np.random.default_rng(0)
    now = datetime.now(UTC)
    t0 = time.perf_counter()
    with SqliteStore(str(db), binding(), index_threshold=None) as store:
        for start, rows in hay.blocks(size):
            for s in range(0, len(rows), 20_000):
                part = rows[s : s + 20_000]
                store.add(
                    [
                        RecordEntry(rng.bytes(32), r, f"r{(start + s + i) // 12}", "k", now)
                        for i, r in enumerate(part)
                    ]
                )
            log(f"filled {start + len(rows):,} rows")
    return time.perf_counter() - t0


def edited_queries(out: Path) -> dict[str, np.ndarray]:
    """The Word-S 15% and Word-D 5% sentences of the study's 70 texts, embedded once,
    each aligned to its text's source sentence (as the study aligned its queries)."""
    path = out / "edited.npz"
    if path.exists():
        with np.load(path) as data:
            return {k: data[k] for k in data.files}
    import torch

    from samark.embed import load_embedder
    from samark.segment import split_sentences

    torch.set_num_threads(1)
    gens, attacked = stored_texts([*ATTACKS, *EDITED])
    # the study's texts: both of its attacks present, sorted, the first 70
    chosen = [k for k in sorted(attacked) if set(ATTACKS) <= set(attacked[k]) and k in gens][:70]
    with np.load(out / "real.npz") as data:
        real = data["real"].astype(np.float32)
    sources = [s for k in chosen for s in split_sentences(gens[k])]
    source_text = [t for t, k in enumerate(chosen) for _ in split_sentences(gens[k])]
    queries, kinds, texts = [], [], []
    for t, k in enumerate(chosen):
        for attack, kind in EDITED.items():
            if attack in attacked[k]:
                for s in split_sentences(attacked[k][attack]):
                    queries.append(s)
                    kinds.append(kind)
                    texts.append(t)
    mpnet = load_embedder()
    qry = mpnet.encode(queries).astype(np.float32)
    src = real[: len(sources)]
    src_text = np.array(source_text)
    source_of = np.array(
        [
            (idx := np.flatnonzero(src_text == texts[i]))[int(np.argmax(src[idx] @ qry[i]))]
            for i in range(len(queries))
        ]
    )
    got = {"queries": qry, "query_kind": np.array(kinds), "source_of": source_of}
    np.savez(path, **got)
    log(f"embedded {len(queries)} edited sentences")
    return got


def exact_top1(rows: np.memmap, size: int, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    best = np.full(len(queries), -1, dtype=np.int64)
    best_cos = np.full(len(queries), -np.inf, dtype=np.float32)
    for start in range(0, size, 100_000):
        end = min(start + 100_000, size)
        cos = queries @ np.asarray(rows[start:end], dtype=np.float32).T
        arg = np.argmax(cos, axis=1)
        top = cos[np.arange(len(cos)), arg]
        better = top > best_cos
        best[better], best_cos[better] = start + arg[better], top[better]
    return best, best_cos


def score(
    store: Any,
    hay: Haystack,
    rows: np.memmap,
    size: int,
    queries: np.ndarray,
    kinds: np.ndarray,
    source_of: np.ndarray,
) -> dict[str, Any]:
    """recall@1 against the exact answer, and the record's answer (the query's own source
    sentence at or above the threshold), per kind. Row ids are haystack index + 1."""
    truth, truth_cos = exact_top1(rows, size, queries)
    found = store.nearest(queries, k=1)
    got = np.array([n[0].sentence.row - 1 for n in found])
    got_cos = np.array([n[0].cosine for n in found], dtype=np.float32)
    hit = (got == truth) | (got_cos >= truth_cos - 1e-4)

    def own(ids: np.ndarray, cos: np.ndarray) -> np.ndarray:
        same = np.zeros(len(ids), dtype=bool)
        real = ids < hay.n_real
        same[real] = np.all(hay.real[ids[real]] == hay.real[source_of[real]], axis=1)
        return same & (cos >= THRESHOLD)

    answered, exact_answered = own(got, got_cos), own(truth, truth_cos)
    out: dict[str, Any] = {"queries": len(queries), "recall_at_1": round(float(hit.mean()), 4)}
    for kind in sorted(set(kinds.tolist())):
        m = kinds == kind
        out[kind] = {
            "queries": int(m.sum()),
            "recall_at_1": round(float(hit[m].mean()), 4),
            "served_found": round(float(answered[m].mean()), 4),
            "served_found_exact": round(float(exact_answered[m].mean()), 4),
        }
    return out


def measure(args: argparse.Namespace) -> None:
    from samark.provenance.sqlite_store import SqliteStore

    size = args.size
    db = args.out / f"record-index-{size}.db"
    if args.reuse:  # re-measure a built record: never fill or build, and say if it is whole
        index_file = db.with_name(db.name + ".index")
        if not db.exists() or not index_file.exists():
            raise SystemExit(f"--reuse: {db} or its index is missing; run without --reuse")
        with SqliteStore(str(db), None) as store:
            if store.count() != size:
                raise SystemExit(f"--reuse: {db} holds {store.count():,} rows, not {size:,}")
    hay = Haystack(args.out, size, args.seed)
    rows = hay.rows_file(args.out)
    result: dict[str, Any] = {"stage": "record-index", **hay.describe(size)}
    if args.reuse:
        result["reused"] = True
    if not db.exists():
        result["fill_s"] = round(fill(db, hay, size), 1)
    index_file = db.with_name(db.name + ".index")
    if args.rebuild or not index_file.exists():
        with SqliteStore(str(db), None) as store:
            t0 = time.perf_counter()
            built = store.build_index()
            result["build_s"] = round(time.perf_counter() - t0, 1)
            result["lists"] = built.lists
    result["record_bytes_per_sentence"] = round(db.stat().st_size / size, 1)
    result["index_bytes_per_sentence"] = round(index_file.stat().st_size / size, 1)
    # memory: a fresh process opening the record and answering its first search
    probe = subprocess.run(
        [sys.executable, "-m", "benchmarks.record_index", "_memory", str(db), str(args.out)],
        capture_output=True,
        text=True,
        check=True,
    )
    result["memory"] = json.loads(probe.stdout.strip().splitlines()[-1])
    lat_q = latency_queries(hay, args.latency_queries)
    # the index at any size (the store's own threshold would answer exactly below it)
    with SqliteStore(str(db), binding(), index_threshold=1) as store:
        lat = latency(lambda q: store.nearest(q[None, :], k=1), lat_q)
        scored = score(store, hay, rows, size, hay.queries, hay.kind, hay.source_of)
        result["index"] = {**lat, **scored}
        if args.edited:
            e = edited_queries(args.out)
            result["index_edited"] = score(
                store, hay, rows, size, e["queries"], e["query_kind"], e["source_of"]
            )
    if args.exact_queries:  # the exact search's matrix: 3 KB a sentence of memory
        with SqliteStore(str(db), binding(), index_threshold=None) as exact:
            exact.nearest(lat_q[:1], k=1)  # loads its matrix
            result["exact"] = latency(
                lambda q: exact.nearest(q[None, :], k=1), lat_q[: args.exact_queries]
            )
    result["machine"] = machine()
    with (args.out / "record-index.jsonl").open("a") as f:
        f.write(json.dumps(result) + "\n")
    log(json.dumps(result))


def memory_probe(db: str, out: str) -> None:
    import faiss  # noqa: F401  (its library's own memory is not the index's)

    from samark.provenance.sqlite_store import SqliteStore

    with np.load(Path(out) / "real.npz") as data:
        q = data["queries"][:1]
    before = rss_kib()
    with SqliteStore(db, binding(), index_threshold=1) as store:
        store.nearest(q, k=1)
        assert store.index.index is not None
        after = rss_kib()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "rss_gained_mib": round((after - before) / 1024, 1),
                "peak_rss_mib": round(peak / 1024, 1),
            }
        )
    )


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "_memory":
        memory_probe(sys.argv[2], sys.argv[3])
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("record-at-scale"))
    p.add_argument("--size", type=int, required=True, help="stored sentences")
    p.add_argument("--seed", type=int, default=56)
    p.add_argument("--latency-queries", type=int, default=300)
    p.add_argument(
        "--exact-queries",
        type=int,
        default=100,
        help="queries timed on the exact search too (0: none; 10M does not fit in memory)",
    )
    p.add_argument("--edited", action="store_true", help="also Word-S 15%% and Word-D 5%%")
    p.add_argument("--rebuild", action="store_true", help="build the index again")
    p.add_argument(
        "--reuse",
        action="store_true",
        help="re-measure latency, recall and memory on the record and index already built "
        "(refuses where either is missing or the record is not whole; nothing is filled)",
    )
    args = p.parse_args()
    if args.reuse and args.rebuild:
        p.error("--reuse measures the index already built; --rebuild builds another")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    measure(args)


if __name__ == "__main__":
    main()
