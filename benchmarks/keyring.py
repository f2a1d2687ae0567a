"""Keyrings measured: the family-wise FPR on human text, attribution and payload on a run's
SAMark texts, and the cost of a large ring.

    python -m benchmarks.keyring fwer experiments/runs/paper --rings 3 --out FILE.json
    python -m benchmarks.keyring fwer --test-corpora --rings 3
    python -m benchmarks.keyring attribution experiments/runs/paper --rings 5 --out FILE.json
    python -m benchmarks.keyring cost experiments/runs/paper
    python -m benchmarks.keyring keys --test-corpora --size 4 --rings 3   # key by key

Rings hold keys drawn as ``samark keygen`` (or the run) draws them: one pivot law, so the
ring's p-value is the exact max-statistic one. Detection uses the commands' statistic
(scan) and the ring's null pool (``ring_null_count``).

Attribution needs no new generation. A ring's keys are i.i.d., so a text written with the
run's key, placed at a uniformly random position among K - 1 fresh keys of the same law,
is distributed exactly as a text written with a payload (the key at that position) of a
ring of K keys. Each text is scored against ``--rings`` such rings per K.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from benchmarks.human_texts import corpus_of, embed_texts, stored_test_corpora
from samark.datasets import Document
from samark.detection.ring_detector import RingDetector
from samark.embed import Embedder, load_embedder
from samark.evaluation.experiment import Experiment
from samark.evaluation.runner import Run, public_key
from samark.keys import WatermarkKey
from samark.keys.keyring import RingEntry, flag_value
from samark.keys.samark_material import PivotDraw
from samark.models import DEFAULT_GENERATOR
from samark.schemes.base import SharedResources
from samark.schemes.samark import SAMark, SAMarkConfig
from samark.segment import split_sentences

RING_SIZES = (1, 4, 16, 64)
ALPHA = 0.01


def ring(
    embedder: Embedder,
    avoid: np.ndarray | None,
    size: int,
    seed: int,
    true: WatermarkKey | None,
    scheme: str = "samark",
    flag_bits: int = 0,
    channels: int = 2,
) -> tuple[RingDetector, int]:
    """A ring of ``size`` keys of one law (and ``flag_bits`` payload bits in the flags);
    with ``true``, that key at a random position (returned) among fresh ones."""
    rng = np.random.default_rng(seed)
    keys = [
        WatermarkKey(
            hashlib.sha256(f"ring-benchmark/{seed}/{i}".encode()).digest(),
            embedder.identity,
            PivotDraw.avoiding(avoid),
        )
        for i in range(size)
    ]
    position = -1
    if true is not None:
        position = int(rng.integers(size))
        keys[position] = true
    labelled = [(RingEntry(f"k{i}", k.key_id, "2026-11-25"), k) for i, k in enumerate(keys)]
    detector = RingDetector.from_keys(
        labelled,
        scheme,
        shared=SharedResources(DEFAULT_GENERATOR, embedder),
        alpha=ALPHA,
        statistic="scan",
        payload_bits=int(np.log2(size)) + flag_bits or None,
        flag_bits=flag_bits,
        **({"channels": channels} if channels != 2 else {}),
    )
    return detector, position


def human(
    args: argparse.Namespace, embedder: Embedder
) -> tuple[list[Document], list[tuple[list[str], np.ndarray]], str]:
    """Human texts, their sentences and embeddings, and what they are."""
    if args.test_corpora:
        docs, sentences, vectors = stored_test_corpora(embedder)
        bounds = np.cumsum([0, *map(len, sentences)])
        scored = [(ss, vectors[bounds[i] : bounds[i + 1]]) for i, ss in enumerate(sentences)]
        return docs, scored, "the calibration tests' corpora (stored embeddings)"
    if args.run is None:
        raise SystemExit("name a run folder, or --test-corpora")
    docs = Run.open(args.run).negatives()
    return docs, embed_texts(embedder, [d.text for d in docs], args.cache), str(args.run)


def fwer(args: argparse.Namespace) -> dict[str, Any]:
    embedder = load_embedder("all-mpnet-base-v2")
    docs, scored, source = human(args, embedder)
    avoid = embedder.reference_directions()
    corpora = [corpus_of(d.id) for d in docs]
    n = len(docs)
    out: dict[str, Any] = {"source": source, "texts": n, "alpha": ALPHA, "rings": {}}
    print(f"{n} human texts: {source}")
    print(
        f"{'keys':>4} {'rings':>5} {'ring FPR':>9} {'95% UB':>7} {'max/ring':>8} "
        f"{'each key alone':>14}  per corpus (ring)"
    )
    for size in RING_SIZES:
        p = np.ones((args.rings, n))
        naive = np.ones((args.rings, n))
        t0 = time.perf_counter()
        for r in range(args.rings):
            detector, _ = ring(embedder, avoid, size, 1000 * size + r, None)
            for i, (sentences, emb) in enumerate(scored):
                if not sentences:
                    continue
                result = detector.score_embeddings(emb, sentences)
                p[r, i] = result.p_value
                naive[r, i] = min(result.key_p_values)
        flags = p < ALPHA
        hits = int(flags.sum())
        by: dict[str, list[bool]] = defaultdict(list)
        for i, c in enumerate(corpora):
            by[c].extend(flags[:, i].tolist())
        row = {
            "rings": args.rings,
            "fpr": float(flags.mean()),
            "fpr_upper_95": float(stats.beta.ppf(0.95, hits + 1, flags.size - hits)),
            "max_ring_fpr": float(flags.mean(axis=1).max()),
            "ring_bound_999": int(stats.binom.ppf(0.999, n, ALPHA)),
            "rings_over_bound": int((flags.sum(axis=1) > stats.binom.ppf(0.999, n, ALPHA)).sum()),
            "ks_greater": float(stats.kstest(p.ravel(), "uniform", alternative="greater").pvalue),
            "any_key_alone_fpr": float((naive < ALPHA).mean()),
            "per_corpus_fpr": {c: float(np.mean(v)) for c, v in sorted(by.items())},
            "seconds": time.perf_counter() - t0,
        }
        out["rings"][str(size)] = row
        corpus_text = ", ".join(f"{c} {100 * v:.2f}%" for c, v in row["per_corpus_fpr"].items())
        print(
            f"{size:>4} {args.rings:>5} {100 * row['fpr']:8.2f}% "
            f"{100 * row['fpr_upper_95']:6.2f}% {100 * row['max_ring_fpr']:7.2f}% "
            f"{100 * row['any_key_alone_fpr']:13.2f}%  {corpus_text}",
            flush=True,
        )
    return out


def keys(args: argparse.Namespace) -> dict[str, Any]:
    """Each key of the ``fwer`` rings of ``--size`` keys alone: its count of p < alpha per
    corpus and a one-sided KS test (which key carries a ring over its bound)."""
    embedder = load_embedder("all-mpnet-base-v2")
    docs, scored, source = human(args, embedder)
    avoid = embedder.reference_directions()
    corpora = np.array([corpus_of(d.id) for d in docs])
    out: dict[str, Any] = {"source": source, "texts": len(docs), "keys": []}
    print(f"{len(docs)} human texts: {source}; the rings of {args.size} keys, key by key")
    for r in range(args.rings):
        detector, _ = ring(embedder, avoid, args.size, 1000 * args.size + r, None)
        for i, scheme in enumerate(detector.schemes):
            single = scheme.detector  # type: ignore[attr-defined]
            p = np.array([single.score_embeddings(e).p_value if ss else 1.0 for ss, e in scored])
            flagged = {str(c): int((p[corpora == c] < ALPHA).sum()) for c in sorted(set(corpora))}
            ks = float(stats.kstest(p, "uniform", alternative="greater").pvalue)
            row = {
                "ring": r,
                "key": i,
                "flagged": int((p < ALPHA).sum()),
                "per_corpus": flagged,
                "ks_greater": ks,
            }
            out["keys"].append(row)
            print(
                f"ring {r} key {i}: {row['flagged']:>3} flagged, {flagged}, KS p {ks:.3g}",
                flush=True,
            )
    return out


def run_records(run_dir: Path, name: str) -> Iterator[dict[str, Any]]:
    """The records of ``name`` (generations, attacks) in a run folder, compacted or not."""
    for path in (run_dir / f"{name}.jsonl.gz", run_dir / f"{name}.jsonl"):
        if path.exists():
            opener = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rt", encoding="utf-8") as f:
                yield from map(json.loads, f)


def run_texts(run_dir: Path, scheme: str) -> dict[str, dict[str, str]]:
    """``{attack: {item: text}}`` of row ``scheme`` ("none": the generations)."""
    out: dict[str, dict[str, str]] = defaultdict(dict)
    for name, attack in (("generations", None), ("attacks", True)):
        for r in run_records(run_dir, name):
            if r.get("scheme") == scheme and isinstance(r.get("text"), str):
                out[r["attack"] if attack else "none"][r["item"]] = r["text"]
    return out


def run_flags(run_dir: Path, label: str, scheme: SAMark) -> dict[str, tuple[int, ...]]:
    """``{item: flags}``: the flag pattern each of row ``label``'s texts was written with,
    drawn again by ``scheme.begin`` (the run's key and the row's channels) from the seeded
    generator its generation started from. Random flags are distributed as a uniform flag
    payload's, so these texts are a flag payload's texts."""
    return {
        r["item"]: tuple(
            int(f) for f in scheme.begin(r["prompt"], np.random.default_rng(r["seed"])).flags
        )
        for r in run_records(run_dir, "generations")
        if r.get("scheme") == label
    }


def attribution(args: argparse.Namespace) -> dict[str, Any]:
    if args.run is None:
        raise SystemExit("attribution needs a run folder")
    experiment = Experiment.load(args.run / "experiment.toml")
    embedder = load_embedder(experiment.embedder)
    true = public_key(experiment, embedder)
    texts = run_texts(args.run, args.scheme)
    writer = SAMark(true, SAMarkConfig.of(channels=args.channels), embedder=embedder)
    flags = run_flags(args.run, args.scheme, writer) if args.flag_bits else {}
    cells: dict[str, list[tuple[str, str]]] = {}  # cell: [(item, text)]
    for attack in ["none", *args.attacks]:
        if attack not in texts:
            raise SystemExit(f"{args.run} has no {attack!r} texts of {args.scheme}")
        cells[attack] = sorted(texts[attack].items())
    for length in args.lengths:  # the first sentences of each unattacked text
        cells[f"{length} sentences"] = [
            (item, " ".join(split_sentences(t)[:length])) for item, t in cells["none"]
        ]
    print(f"{args.scheme} of {args.run}: {', '.join(f'{c} ({len(v)})' for c, v in cells.items())}")
    if args.flag_bits:
        print(f"{args.flag_bits} payload bits in the flags (each text's own, from its seed)")
    print(
        f"{'keys':>4} {'bits':>4} {'cell':28} {'detected':>8} {'right|det':>9} {'wrong':>6} "
        f"{'key|det':>7} {'key alone':>9}"
    )
    out: dict[str, Any] = {
        "run": str(args.run),
        "scheme": args.scheme,
        "name": args.name,
        "alpha": ALPHA,
        "flag_bits": args.flag_bits,
        "cells": [],
    }
    with embedder.remembering():  # every text is embedded once, whatever the rings
        for size in args.sizes:
            rings = [
                ring(
                    embedder,
                    true.samark.avoid,
                    size,
                    7000 * size + r,
                    true,
                    args.name,
                    args.flag_bits,
                    args.channels,
                )
                for r in range(args.rings)
            ]
            for cell, items in cells.items():
                detected = right = wrong = key_right = alone = total = 0
                for detector, position in rings:
                    found = detector.detect_many([t for _, t in items])
                    for (item, _), result in zip(items, found, strict=True):
                        if result is None:
                            continue
                        total += 1
                        alone += result.key_p_values[position] < ALPHA
                        if result.is_watermarked:
                            # the value written, and the one the ring decodes (without
                            # flag bits, the key's position: a 1-key ring carries none)
                            written, decoded = position, result.position
                            if args.flag_bits:
                                low = flag_value(flags[item], args.flag_bits)
                                written = position << args.flag_bits | low
                                decoded = result.payload
                            detected += 1
                            key_right += result.position == position
                            right += decoded == written
                            wrong += decoded != written
                row = {
                    "keys": size,
                    "bits": int(np.log2(size)) + args.flag_bits,
                    "cell": cell,
                    "scored": total,
                    "detected": detected / total,
                    "right_among_detected": right / detected if detected else float("nan"),
                    "key_right_among_detected": key_right / detected if detected else float("nan"),
                    "wrong_of_all": wrong / total,
                    "true_key_alone": alone / total,
                }
                out["cells"].append(row)
                print(
                    f"{size:>4} {row['bits']:>4} {cell:28} {100 * row['detected']:7.1f}% "
                    f"{100 * row['right_among_detected']:8.1f}% {100 * row['wrong_of_all']:5.1f}% "
                    f"{100 * row['key_right_among_detected']:6.1f}% "
                    f"{100 * row['true_key_alone']:8.1f}%",
                    flush=True,
                )
    return out


def cost(args: argparse.Namespace) -> dict[str, Any]:
    """Seconds to detect the run's texts from text (embedding included) with one key and
    with a ring of 64, in one process; the null pools are built first (once per ring size,
    reported apart)."""
    if args.run is None:
        raise SystemExit("cost needs a run folder")
    experiment = Experiment.load(args.run / "experiment.toml")
    embedder = load_embedder(experiment.embedder)
    texts = [
        run_texts(args.run, args.scheme)["none"][i]
        for i in sorted(run_texts(args.run, args.scheme)["none"])
    ]
    true = public_key(experiment, embedder)
    out: dict[str, Any] = {"texts": len(texts)}
    embedder.encode(split_sentences(texts[0]))  # warm
    for size in (1, 64):
        t0 = time.perf_counter()
        detector, _ = ring(embedder, true.samark.avoid, size, 99, true)
        detector.score_embeddings(embedder.encode(split_sentences(texts[0])))  # builds the pool
        build = time.perf_counter() - t0
        seconds = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            detector.detect_many(texts)
            seconds.append(time.perf_counter() - t0)
        out[str(size)] = {"build_seconds": build, "detect_seconds": min(seconds)}
        print(
            f"{size:>3} keys: {min(seconds):.2f} s for {len(texts)} texts "
            f"(best of {args.repeats}); ring built in {build:.1f} s",
            flush=True,
        )
    out["ratio_64_to_1"] = out["64"]["detect_seconds"] / out["1"]["detect_seconds"]
    print(f"64 keys / 1 key: {out['ratio_64_to_1']:.2f}x")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["fwer", "keys", "attribution", "cost"])
    ap.add_argument("run", type=Path, nargs="?", help="a run folder")
    ap.add_argument(
        "--test-corpora", action="store_true", help="fwer: the calibration tests' corpora"
    )
    ap.add_argument("--rings", type=int, default=3, help="rings per size")
    ap.add_argument("--cache", type=Path, default=None, help="fwer: embeddings cache (.npz)")
    ap.add_argument("--scheme", default="SAMark", help="attribution: the run's row label")
    ap.add_argument("--name", default="samark", help="attribution: the row's registered scheme")
    ap.add_argument(
        "--attacks",
        default="Doc-P (local);Doc-T (pt, sentence-wise)",
        help="attribution: attack labels, ';'-separated",
    )
    ap.add_argument("--lengths", default="3,6", help="attribution: prefix lengths")
    ap.add_argument("--sizes", default="2,4,16,64", help="attribution: ring sizes")
    ap.add_argument(
        "--flag-bits",
        type=int,
        default=0,
        help="attribution: payload bits in the flags too (each text's own flags)",
    )
    ap.add_argument(
        "--channels", type=int, default=2, help="attribution: the row's channels (pivots)"
    )
    ap.add_argument("--repeats", type=int, default=3, help="cost: best of")
    ap.add_argument("--size", type=int, default=4, help="keys: the rings' size")
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    args = ap.parse_args()
    args.attacks = [a for a in args.attacks.split(";") if a]
    args.lengths = [int(x) for x in args.lengths.split(",") if x]
    args.sizes = [int(x) for x in args.sizes.split(",") if x]
    result = {"fwer": fwer, "keys": keys, "attribution": attribution, "cost": cost}[args.what](args)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
