"""Forgery through a public detection endpoint (issue 36): how many queries an attacker who
can ask the operator's detector needs before human text is flagged as marked.

The attacker holds public human sentences (the calibration corpora, first 10 sentences of
each document, with their stored embeddings) and an oracle for the operator's key: a
detection endpoint that returns either the p-value or the decision at alpha = 1% only
(what `samark serve`'s /v1/detect would give a client). No marked text is used. Each
repetition draws a fresh key (as keygen draws them) and starts from a random human text of
10 sentences:

- ``p-value`` oracle, hill climbing: each query swaps one sentence for a random pool
  sentence of the same corpus and keeps the swap when p does not rise;
- ``decision`` oracle, random search: each query is another random human text (10
  sentences of one document, or of one corpus for documents too short); the decision says
  nothing until it says "marked", so nothing better than fresh draws is known.

It prints, per detector (SAMark ``scan`` and ``z``, the layered p-value; with
``--detectors`` also the token rows ``kgw``, ``synthid``, ``unigram``), the median and
quartiles of the queries to the first text at p < 0.01, and (p-value oracle) to the p-value
floor 1/(n_null + 1) = 0.001, and how often ``--queries`` were not enough.

    python -m benchmarks.studies.oracle_forgery --keys 20 --queries 2000 \
        --out docs/results/2026-11-26-forgery/oracle.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.human_texts import corpus_of, stored_test_corpora
from samark.datasets import Document
from samark.embed import load_embedder
from samark.keys import WatermarkKey
from samark.keys.samark_material import PivotDraw
from samark.schemes.samark.config import SAMarkDetection
from samark.schemes.samark.detector import SAMarkDetector

ALPHA = 0.01
DETECTORS = ("scan", "z", "layered", "kgw", "synthid", "unigram")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=20, help="repetitions, a fresh key each")
    ap.add_argument("--queries", type=int, default=2000, help="the attacker's budget")
    ap.add_argument("--detectors", nargs="+", default=list(DETECTORS[:3]), choices=DETECTORS)
    ap.add_argument("--out", type=Path, default=None, help="JSONL, one line per attack")
    args = ap.parse_args()

    emb = load_embedder("all-mpnet-base-v2")
    pool = HumanPool(*stored_test_corpora(emb))
    print(f"{len(pool.sentences)} human texts, {len(pool.vectors)} sentences", flush=True)

    out = args.out.open("a") if args.out else None
    results: dict[tuple[str, str], list[dict[str, object]]] = {}
    t0 = time.perf_counter()
    for rep in range(args.keys):
        secret = f"oracle-forgery-{rep:04d}".encode().ljust(32, b"0")
        key = WatermarkKey(secret, emb.identity, PivotDraw.avoiding(emb.reference_directions()))
        for name in args.detectors:
            oracle = _oracle(name, key, emb)
            for kind in ("p-value", "decision"):
                rng = np.random.default_rng([rep, zlib.crc32(f"{name}/{kind}".encode())])
                attack = _hill_climb if kind == "p-value" else _random_search
                row = attack(oracle, rng, pool, args.queries)
                row |= {"detector": name, "oracle": kind, "key": rep}
                results.setdefault((name, kind), []).append(row)
                if out:
                    out.write(json.dumps(row) + "\n")
                    out.flush()
        print(f"  key {rep + 1}/{args.keys} ({time.perf_counter() - t0:.0f} s)", flush=True)
    if out:
        out.close()
    _print(results, args.queries)


Oracle = Callable[[list[str], np.ndarray], float]


def _oracle(name: str, key: WatermarkKey, emb: object) -> Oracle:
    """``(sentences, embeddings) -> p``: the detector an endpoint would run."""
    from samark.schemes import create_scheme
    from samark.schemes.samark.layered import SAMarkLayered, combine_p_values

    if name not in ("scan", "z", "layered"):  # a token row, keyed by the same secret
        token = create_scheme(name, key=key)
        return lambda sents, e: token.detect(" ".join(sents)).p_value
    statistic = "z" if name == "z" else "scan"
    det = SAMarkDetector(key, emb, SAMarkDetection(statistic=statistic))  # type: ignore[arg-type]
    if name != "layered":
        return lambda sents, e: det.score_embeddings(e).p_value
    scheme = create_scheme("samark-layered", key=key, embedder=emb)
    assert isinstance(scheme, SAMarkLayered)

    def both(sents: list[str], e: np.ndarray) -> float:
        p_tok = scheme.token_layer.score(scheme.token_ids(" ".join(sents))).p_value
        return combine_p_values(det.score_embeddings(e).p_value, p_tok)

    return both


class HumanPool:
    """The attacker's public human texts: each document's sentences and embeddings, and
    every sentence by corpus (what a swap or a short document draws from)."""

    def __init__(
        self, docs: list[Document], sentences: list[list[str]], vectors: np.ndarray
    ) -> None:
        self.sentences, self.vectors = sentences, vectors
        self.bounds = np.cumsum([0, *map(len, sentences)])
        self.corpus = [corpus_of(d.id) for d in docs]
        self.by_corpus: dict[str, list[tuple[str, np.ndarray]]] = {}
        for i, sents in enumerate(sentences):
            self.by_corpus.setdefault(self.corpus[i], []).extend(
                zip(sents, self.embeddings(i), strict=True)
            )
        #: documents of 10 sentences: where a hill climb starts
        self.starts = [i for i, s in enumerate(sentences) if len(s) == 10]

    def embeddings(self, doc: int) -> np.ndarray:
        return self.vectors[self.bounds[doc] : self.bounds[doc + 1]]


def _hill_climb(
    oracle: Oracle, rng: np.random.Generator, pool: HumanPool, budget: int
) -> dict[str, object]:
    doc = int(rng.choice(pool.starts))
    sents = list(pool.sentences[doc])
    emb = pool.embeddings(doc).copy()
    own = pool.by_corpus[pool.corpus[doc]]
    p = oracle(sents, emb)
    first, floor, trace = None, None, [p]
    for q in range(1, budget + 1):
        i = int(rng.integers(len(sents)))
        s, v = own[int(rng.integers(len(own)))]
        if s in sents:
            continue
        old = (sents[i], emb[i].copy())
        sents[i], emb[i] = s, v
        new = oracle(sents, emb)
        if new <= p:
            p = new
        else:
            sents[i], emb[i] = old
        if first is None and p < ALPHA:
            first = q
        if p <= 0.001 + 1e-12:
            floor = q
            break
        if q % 100 == 0:
            trace.append(p)
    return {
        "to_alpha": first,
        "to_floor": floor,
        "final_p": p,
        "corpus": pool.corpus[doc],
        "trace": trace,
    }


def _random_search(
    oracle: Oracle, rng: np.random.Generator, pool: HumanPool, budget: int
) -> dict[str, object]:
    for q in range(1, budget + 1):
        doc = int(rng.integers(len(pool.sentences)))
        if len(pool.sentences[doc]) >= 10:
            sents, emb = pool.sentences[doc], pool.embeddings(doc)
        else:  # a short document: 10 random sentences of its corpus
            own = pool.by_corpus[pool.corpus[doc]]
            picks = rng.choice(len(own), size=10, replace=False)
            sents = [own[j][0] for j in picks]
            emb = np.stack([own[j][1] for j in picks])
        if oracle(sents, emb) < ALPHA:
            return {"to_alpha": q, "to_floor": None, "final_p": None, "corpus": pool.corpus[doc]}
    return {"to_alpha": None, "to_floor": None, "final_p": None, "corpus": None}


def _print(results: dict[tuple[str, str], list[dict[str, object]]], budget: int) -> None:
    print(
        f"\nqueries to a human text flagged at p < {ALPHA} (median [quartiles]; failed = "
        f"not within {budget})"
    )
    print(
        f"{'detector':10} {'oracle':9} {'to p < 0.01':>22} {'failed':>7} "
        f"{'to p = 0.001':>22} {'failed':>7}"
    )
    for (name, kind), rows in results.items():
        cells = []
        for field in ("to_alpha", "to_floor"):
            got = [int(r[field]) for r in rows if r[field] is not None]  # type: ignore[call-overload]
            failed = len(rows) - len(got)
            if kind == "decision" and field == "to_floor":
                cells += ["-", "-"]
                continue
            q = np.percentile(got, [25, 50, 75]) if got else [np.nan] * 3
            cells += [f"{q[1]:.0f} [{q[0]:.0f}, {q[2]:.0f}]", f"{failed}/{len(rows)}"]
        print(f"{name:10} {kind:9} {cells[0]:>22} {cells[1]:>7} {cells[2]:>22} {cells[3]:>7}")


if __name__ == "__main__":
    main()
