"""The provenance record under attack, and at scale (issue 45).

``attacks``: the 40 marked texts of the paper run's ``SAMark (layered)`` row (12
sentences each; ``experiments/runs/paper/generations.jsonl``, read directly) are recorded
sentence by sentence (each row's ``sentences``, as ``samark generate --record`` records
them) in a fresh SQLite record under a throwaway key, then attacked and checked:

- **piggyback** (``samark.evaluation.attacks.piggyback``), at the levels of
  ``benchmarks/studies/forgery.py`` (light: 2 negations, 2 numbers, 1 name swap, 1 false
  sentence; heavy: 4, 3, 2, 3) and with its seeds (1000 + i). The attack reports counts,
  not which sentences it touched, so the truth is rebuilt from its output: a sentence of
  the forged text whose normal form is an original sentence's is *untouched*; one that
  matches a template of the attack's false claims (``is_false_claim``, the name as a
  wildcard) is *inserted*; every other one is *edited*. The attack only inserts sentences
  and edits words inside sentences, so with the inserted ones taken out the forged
  sentences line up one to one with the original ones; a text where the counts do not
  add up (untouched + edited = original sentences, inserted = the attack's own count) is
  reported. Precision and recall: the report's ``edited`` (state ``paraphrase``) against
  the edited sentences, its ``not_served`` against the inserted ones.
- **Doc-P** (``doc-p-local``, its defaults: every sentence back-translated en-pt-en, 15%
  split, merged and moved) and **Doc-T** (``doc-t``, en-pt-en sentence by sentence,
  offline), seeds 0-39: the share of the attacked texts' sentences matched (``served`` or
  ``paraphrase``) at the default threshold, and how many of those matched a sentence of
  their own text; the shares at lower thresholds are read off the reported cosines.

``scale``: lookup latency and bytes per stored sentence of the SQLite store at growing
sizes, with synthetic unit vectors (768-d, Gaussian) and random 32-byte digests, 12
sentences a request: one nearest-neighbour search (``store.nearest``, one query, k = 1,
the stored row read back) and one keyed-hash lookup, each timed ``--queries`` times after
a cold first search (which loads the matrix into memory).

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python -m benchmarks.studies.provenance_attacks attacks
    OMP_NUM_THREADS=1 python -m benchmarks.studies.provenance_attacks scale \\
        --sizes 100000,1000000

The key is made for the run and never written or printed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.studies.forgery import LEVELS  # the forgery study's piggyback levels
from samark.evaluation.attacks.piggyback import is_false_claim
from samark.provenance import ProvenanceReport, ProvenanceState, normalise
from samark.segment import split_sentences

ROW = "SAMark (layered)"
#: lower thresholds whose shares are read off the reported cosines, with their false-match
#: rates per sentence against ~4,800 stored sentences (docs/results/2026-11-27-provenance-
#: threshold)
OTHER_THRESHOLDS = (0.85, 0.80)
TRUTHS = ("untouched", "edited", "inserted")
STATES = (ProvenanceState.SERVED, ProvenanceState.PARAPHRASE, ProvenanceState.NOT_SERVED)


def _threads() -> None:
    import torch

    torch.set_num_threads(1)


def load_texts(path: Path, n: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if row.get("scheme") == ROW:
                rows.append(row)
    if len(rows) < n:
        raise SystemExit(f"{path}: {len(rows)} rows of {ROW!r}, wanted {n}")
    return rows[:n]


@dataclass
class PiggybackTally:
    """Truth x state counts over all texts, and what else the study prints."""

    confusion: Counter[tuple[str, str]] = field(default_factory=Counter)
    right_source: int = 0  # edited sentences called a paraphrase of their own original
    misaligned: int = 0  # texts whose rebuilt truth does not add up
    edited_cos: list[float] = field(default_factory=list)
    inserted_cos: list[float] = field(default_factory=list)
    inserted_unsearched: int = 0  # inserted, too short to be searched: not served
    texts: int = 0

    def add(self, truth: str, state: ProvenanceState) -> None:
        self.confusion[truth, state.value] += 1

    def pr(self, truth: str, state: ProvenanceState) -> tuple[float, float, int, int, int]:
        hit = self.confusion[truth, state.value]
        called = sum(self.confusion[t, state.value] for t in TRUTHS)
        real = sum(self.confusion[truth, s.value] for s in STATES)
        return _ratio(hit, called), _ratio(hit, real), hit, called, real


def _ratio(a: int, b: int) -> float:
    return a / b if b else float("nan")


def piggyback_truth(original: list[str], forged: list[str]) -> tuple[list[str], list[int | None]]:
    """Each forged sentence's truth (untouched / edited / inserted) and, for the first two,
    the index of the original sentence it came from (None where they do not line up)."""
    normal = {normalise(s) for s in original}
    truth = [
        "untouched" if normalise(s) in normal else "inserted" if is_false_claim(s) else "edited"
        for s in forged
    ]
    kept = [j for j, t in enumerate(truth) if t != "inserted"]
    source: list[int | None] = [None] * len(forged)
    if len(kept) == len(original):
        for k, j in enumerate(kept):
            source[j] = k
    return truth, source


def attacks(args: argparse.Namespace) -> None:
    _threads()
    from samark.embed import load_embedder, new_key
    from samark.evaluation.attacks import create_attack
    from samark.provenance import ProvenanceRecord

    rows = load_texts(args.run / "generations.jsonl", args.texts)
    texts = [str(r["text"]) for r in rows]
    served = [[str(s) for s in r["sentences"]] for r in rows]
    resplit = sum(split_sentences(t) != s for t, s in zip(texts, served, strict=True))
    embedder = load_embedder(args.embedder)
    start = time.perf_counter()
    out: dict[str, Any] = {"texts": len(texts), "resplit_differs": resplit}
    with tempfile.TemporaryDirectory() as tmp:
        url = str(Path(tmp) / "record.db")
        # a throwaway key: the record's hashes depend on it, the results do not
        with ProvenanceRecord.open(url, new_key(embedder), embedder) as record:
            requests = [record.record(s, store_text=True) for s in served]
            stored = record.store.count()
            out["stored"] = stored
            out["threshold"] = record.threshold
            print(
                f"recorded {stored} sentences of {len(texts)} texts ({resplit} texts whose "
                f"text re-splits differently from its served sentences), threshold "
                f"{record.threshold}; {time.perf_counter() - start:.0f} s",
                flush=True,
            )
            out["piggyback"] = _piggyback(record, texts)
            print(f"piggyback done: {time.perf_counter() - start:.0f} s", flush=True)
            for name, attack in (
                ("Doc-P (doc-p-local)", create_attack("doc-p-local")),
                ("Doc-T (doc-t, en-pt-en)", create_attack("doc-t", via="pt")),
            ):
                attacked = attack.apply_batch(texts, seeds=list(range(len(texts))))
                reports = [record.check(a) for a in attacked]
                out[name] = _paraphrase_row(reports, requests, record.threshold)
                print(f"{name} done: {time.perf_counter() - start:.0f} s", flush=True)
    out["seconds"] = round(time.perf_counter() - start)
    print_attacks(out)
    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


def _piggyback(record: Any, texts: list[str]) -> dict[str, Any]:
    from samark.evaluation.attacks.piggyback import Piggyback

    results: dict[str, Any] = {}
    for level, counts in LEVELS.items():
        attack = Piggyback(**counts)
        tally = PiggybackTally()
        for i, text in enumerate(texts):
            # the truth is the attack's: the sentences it split the text into
            original = split_sentences(text)
            forged_text, edits = attack.edits(text, random.Random(1000 + i))
            forged = split_sentences(forged_text)
            truth, source = piggyback_truth(original, forged)
            if truth.count("inserted") != edits.inserted or (
                len(forged) - truth.count("inserted") != len(original)
            ):
                tally.misaligned += 1
            report: ProvenanceReport = record.check_sentences(forged)
            tally.texts += 1
            for j, s in enumerate(report.sentences):
                tally.add(truth[j], s.state)
                if truth[j] == "edited" and s.cosine is not None:
                    tally.edited_cos.append(s.cosine)
                    k = source[j]
                    if (
                        s.state is ProvenanceState.PARAPHRASE
                        and k is not None
                        and s.match is not None
                        and s.match.text == original[k]
                    ):
                        tally.right_source += 1
                if truth[j] == "inserted":
                    if s.cosine is not None:
                        tally.inserted_cos.append(s.cosine)
                    elif s.state is ProvenanceState.NOT_SERVED:
                        tally.inserted_unsearched += 1
        ep, er, *_ = tally.pr("edited", ProvenanceState.PARAPHRASE)
        ip, ir, *_ = tally.pr("inserted", ProvenanceState.NOT_SERVED)
        sweep = {}
        for t in OTHER_THRESHOLDS:
            # edited: a paraphrase at t; inserted: not served at t (the cosines say)
            e_hit = sum(c >= t for c in tally.edited_cos)
            i_hit = sum(c < t for c in tally.inserted_cos) + tally.inserted_unsearched
            n_edited = sum(tally.confusion["edited", s.value] for s in STATES)
            n_inserted = sum(tally.confusion["inserted", s.value] for s in STATES)
            sweep[str(t)] = {
                "edited_recall": round(_ratio(e_hit, n_edited), 3),
                "inserted_recall": round(_ratio(i_hit, n_inserted), 3),
            }
        # not vouched (paraphrase or not served) against touched (edited or inserted)
        touched = sum(tally.confusion[t, s.value] for t in TRUTHS[1:] for s in STATES)
        flagged = sum(tally.confusion[t, s.value] for t in TRUTHS for s in STATES[1:])
        both = sum(tally.confusion[t, s.value] for t in TRUTHS[1:] for s in STATES[1:])
        results[level] = {
            "texts": tally.texts,
            "touched_precision": _ratio(both, flagged),
            "touched_recall": _ratio(both, touched),
            "misaligned_texts": tally.misaligned,
            "confusion": {f"{t}->{s}": n for (t, s), n in sorted(tally.confusion.items())},
            "edited_precision": ep,
            "edited_recall": er,
            "inserted_precision": ip,
            "inserted_recall": ir,
            "edited_right_source": tally.right_source,
            "edited_cosine_quartiles": _quartiles(tally.edited_cos),
            "inserted_cosine_max": max(tally.inserted_cos, default=float("nan")),
            "inserted_cosine_quartiles": _quartiles(tally.inserted_cos),
            "sweep": sweep,
        }
    return results


def _quartiles(values: list[float]) -> list[float]:
    if not values:
        return []
    return [round(float(q), 3) for q in np.quantile(values, [0.0, 0.25, 0.5, 0.75, 1.0])]


def _paraphrase_row(
    reports: list[ProvenanceReport], requests: list[str], threshold: float
) -> dict[str, Any]:
    states: Counter[str] = Counter()
    own = 0
    cosines: list[float] = []
    short = 0
    for report, request in zip(reports, requests, strict=True):
        for s in report.sentences:
            states[s.state.value] += 1
            if s.state is not ProvenanceState.NOT_SERVED and s.match is not None:
                own += s.match.request_id == request
            if s.state is not ProvenanceState.SERVED:
                if s.cosine is None:
                    short += 1  # too short to be searched
                else:
                    cosines.append(s.cosine)
    total = sum(states.values())
    matched = states["served"] + states["paraphrase"]
    at = {
        str(t): _ratio(states["served"] + sum(c >= t for c in cosines), total)
        for t in OTHER_THRESHOLDS
    }
    return {
        "sentences": total,
        "served": states["served"],
        "paraphrase": states["paraphrase"],
        "not_served": states["not_served"],
        "not_searched_short": short,
        "matched_share": _ratio(matched, total),
        "matched_own_text": own,
        "matched_share_at": at,
        "threshold": threshold,
        "searched_cosine_quartiles": _quartiles(cosines),
    }


def print_attacks(out: dict[str, Any]) -> None:
    print(
        f"\n{out['texts']} texts of {ROW!r}, {out['stored']} stored sentences, threshold "
        f"{out['threshold']}\n"
    )
    print("Piggyback: the report's states against the rebuilt truth (sentences)\n")
    print("| level | truth | served | paraphrase (edited) | not served |")
    print("|---|---|---|---|---|")
    for level, r in out["piggyback"].items():
        for t in TRUTHS:
            cells = [str(r["confusion"].get(f"{t}->{s.value}", 0)) for s in STATES]
            print(f"| {level} | {t} | " + " | ".join(cells) + " |")
    print(
        "\n| level | edited: precision | edited: recall | inserted: precision | "
        "inserted: recall | not vouched vs touched: precision / recall | "
        "edited matched to its own original | misaligned texts |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for level, r in out["piggyback"].items():
        conf = r["confusion"]
        edited = sum(conf.get(f"edited->{s.value}", 0) for s in STATES)
        para = conf.get("edited->paraphrase", 0)
        print(
            f"| {level} | {r['edited_precision']:.3f} | {r['edited_recall']:.3f} | "
            f"{r['inserted_precision']:.3f} | {r['inserted_recall']:.3f} | "
            f"{r['touched_precision']:.3f} / {r['touched_recall']:.3f} | "
            f"{r['edited_right_source']} of {para} (of {edited} edited) | "
            f"{r['misaligned_texts']} of {r['texts']} |"
        )
    print("\nCosines with the nearest stored sentence (min, quartiles, max):")
    for level, r in out["piggyback"].items():
        print(
            f"  {level}: edited {r['edited_cosine_quartiles']}, inserted "
            f"{r['inserted_cosine_quartiles']}; at lower thresholds: {r['sweep']}"
        )
    print("\nParaphrases: share of the attacked texts' sentences matched\n")
    thresholds = " | ".join(f"matched at {t}" for t in OTHER_THRESHOLDS)
    print(
        f"| attack | sentences | served | paraphrase | not served | matched at "
        f"{out['threshold']} | matched to its own text | {thresholds} |"
    )
    print("|---|---|---|---|---|---|---|" + "---|" * len(OTHER_THRESHOLDS))
    for name in ("Doc-P (doc-p-local)", "Doc-T (doc-t, en-pt-en)"):
        r = out[name]
        matched = r["served"] + r["paraphrase"]
        shares = " | ".join(f"{v:.1%}" for v in r["matched_share_at"].values())
        print(
            f"| {name} | {r['sentences']} | {r['served']} | {r['paraphrase']} | "
            f"{r['not_served']} | **{r['matched_share']:.1%}** | {r['matched_own_text']} "
            f"of {matched} | {shares} |"
        )
    for name in ("Doc-P (doc-p-local)", "Doc-T (doc-t, en-pt-en)"):
        r = out[name]
        print(
            f"  {name}: cosines of searched sentences {r['searched_cosine_quartiles']}, "
            f"{r['not_searched_short']} not searched (under 4 words)"
        )
    print(f"\n{out['seconds']} s")


# -- scale -------------------------------------------------------------------------------


def _rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _unit_rows(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.standard_normal((n, dim), dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def scale(args: argparse.Namespace) -> None:
    from samark.provenance import RecordEntry, StoreBinding, open_store

    sizes = sorted(int(s) for s in args.sizes.split(","))
    dim = args.dim
    binding = StoreBinding(
        record_key="0" * 32, embedder="synthetic", embedder_fingerprint="synthetic", dim=dim
    )
    rng = np.random.default_rng(args.seed)
    folder = Path(args.dir or tempfile.mkdtemp(prefix="samark-provenance-scale-"))
    path = folder / "record.db"
    if path.exists():
        raise SystemExit(f"{path} exists; give an empty --dir")
    url = str(path)
    results: list[dict[str, Any]] = []
    probes: list[bytes] = []
    total = 0
    when = datetime.now(UTC)
    try:
        for size in sizes:
            start = time.perf_counter()
            with open_store(url, binding) as store:
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
                    total += n
            insert_s = time.perf_counter() - start
            files = [path, path.with_name(path.name + "-wal")]
            size_bytes = sum(f.stat().st_size for f in files if f.exists())
            # a fresh process's view: open, the first search loads every embedding
            with open_store(url, binding) as store:
                queries = _unit_rows(rng, args.queries + 1, dim)
                t0 = time.perf_counter()
                store.nearest(queries[:1], k=1)
                cold = time.perf_counter() - t0
                near: list[float] = []
                for q in queries[1:]:
                    t0 = time.perf_counter()
                    store.nearest(q[None, :], k=1)
                    near.append(time.perf_counter() - t0)
                hashed: list[float] = []
                for j in range(args.queries):
                    digest = probes[j % len(probes)] if j % 2 else rng.bytes(32)
                    t0 = time.perf_counter()
                    store.lookup([digest])
                    hashed.append(time.perf_counter() - t0)
                count = store.count()
            row = {
                "sentences": count,
                "insert_s": round(insert_s, 1),
                "file_bytes": size_bytes,
                "bytes_per_sentence": round(size_bytes / count, 1),
                "cold_first_search_s": round(cold, 2),
                "nearest_p50_ms": round(1e3 * float(np.percentile(near, 50)), 1),
                "nearest_p99_ms": round(1e3 * float(np.percentile(near, 99)), 1),
                "hash_p50_ms": round(1e3 * float(np.percentile(hashed, 50)), 3),
                "hash_p99_ms": round(1e3 * float(np.percentile(hashed, 99)), 3),
                "peak_rss_gib": round(_rss_gib(), 2),
                "queries": args.queries,
            }
            results.append(row)
            print(json.dumps(row), flush=True)
    finally:
        if not args.keep:
            for f in folder.glob("record.db*"):
                f.unlink()
            if not args.dir:
                folder.rmdir()
    print(f"\nSQLite store, {dim}-d synthetic unit vectors, one query at a time\n")
    print(
        "| stored sentences | bytes per sentence (file) | insert of the rows added (s) | "
        "first search (loads all, s) | nearest p50 (ms) | nearest p99 (ms) | "
        "hash lookup p50 / p99 (ms) | peak RSS (GiB) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['sentences']:,} | {r['bytes_per_sentence']:,.0f} | {r['insert_s']} | "
            f"{r['cold_first_search_s']} | {r['nearest_p50_ms']} | {r['nearest_p99_ms']} | "
            f"{r['hash_p50_ms']} / {r['hash_p99_ms']} | {r['peak_rss_gib']} |"
        )
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = ap.add_subparsers(dest="command", required=True)
    a = sub.add_parser("attacks", help="piggyback, Doc-P and Doc-T against the record")
    a.add_argument("--run", type=Path, default=Path("experiments/runs/paper"))
    a.add_argument("--texts", type=int, default=40)
    a.add_argument("--embedder", default="all-mpnet-base-v2")
    a.add_argument("--out", type=Path, help="write the figures as JSON here")
    a.set_defaults(func=attacks)
    s = sub.add_parser("scale", help="lookup latency and bytes per sentence by store size")
    s.add_argument("--sizes", default="100000,1000000", help="cumulative store sizes")
    s.add_argument("--dim", type=int, default=768)
    s.add_argument("--queries", type=int, default=200)
    s.add_argument("--batch", type=int, default=10000, help="sentences per transaction")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--dir", help="folder for the record (default: a new temporary one)")
    s.add_argument("--keep", action="store_true", help="keep the record file")
    s.add_argument("--out", type=Path, help="write the figures as JSON here")
    s.set_defaults(func=scale)
    args = ap.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
