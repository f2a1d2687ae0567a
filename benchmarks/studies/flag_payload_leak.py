"""What a flag payload gives away: how many marked texts of one payload value let a forger
write human text that the key detects.

With random flags (Alg. 1) a key's texts lean toward a different orthant of its pivot
space each; with a flag payload every text of one value leans the same way, so their mean
sentence embedding points toward the pivots. This measures that first-moment leak against
the second-moment one that random flags already leave, on a run's own SAMark texts:

- **fixed flags (a flag payload):** ``n`` texts written with the same flag pattern (the
  run's texts grouped by the flags drawn from their seeds; random flags are distributed as
  a uniform payload's). The forger's direction is their mean sentence embedding minus the
  human mean.
- **relative flags (a relative flag payload):** ``n`` texts whose flags agree relative to
  the first flag (``c - 1`` bits), the first drawn per text: the texts of one value lean to
  two opposite orthants, so their mean cancels, and the forger takes the scatter's top
  direction (as below).
- **random flags (no flag payload):** ``n`` texts of any flags. The flags cancel in the
  mean, so the forger takes the top eigenvector of the texts' mean-embedding scatter minus
  human texts' (directions where marked texts spread more than human ones).
- **no marked text:** a random direction (the control).

Either way the forger joins the ``--sentences`` human sentences closest to the direction
(from the calibration corpora: 1,000 texts that never saw the key) and the key's own
detector scores the result; "forged" is p < 0.01. The share of the direction inside the
key's pivot span (|cos| to the span) says how much of the key leaked (a truth the forger
never sees; a random direction has about sqrt(c / dim)).

    python -m benchmarks.studies.flag_payload_leak experiments/runs/paper --draws 60 \
        --out FILE.json --plot FILE.png
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.human_texts import stored_test_corpora
from benchmarks.keyring import ring, run_flags, run_texts
from samark.embed import load_embedder
from samark.evaluation.experiment import Experiment
from samark.evaluation.runner import public_key
from samark.schemes.samark import SAMark, SAMarkConfig
from samark.schemes.samark.detector import embed_sentences

ALPHA = 0.01


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, nargs="?", help="a run folder with SAMark texts")
    ap.add_argument("--scheme", default="SAMark", help="the run's row label")
    ap.add_argument("--channels", type=int, default=2)
    ap.add_argument("--counts", default="1,2,4,8,16", help="marked texts the forger holds")
    ap.add_argument("--random-counts", default="1,2,4,8,16,32", help="the same, random flags")
    ap.add_argument("--draws", type=int, default=60, help="forgeries per count")
    ap.add_argument("--sentences", type=int, default=12, help="sentences per forged text")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--settings", default="control,fixed,relative,random", help="what to measure")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--plot", type=Path, default=None, help="forged share against texts (PNG)")
    ap.add_argument(
        "--from-json", type=Path, default=None, help="plot an earlier --out file, measure nothing"
    )
    args = ap.parse_args()
    if args.from_json is not None:
        plot(json.loads(args.from_json.read_text())["rows"], args.plot or Path("leak.png"))
        return

    experiment = Experiment.load(args.run / "experiment.toml")
    embedder = load_embedder(experiment.embedder)
    key = public_key(experiment, embedder)
    detector, _ = ring(embedder, key.samark.avoid, 1, 1, key)
    pivots = key.samark.pivots(embedder.dim, args.channels)
    texts = run_texts(args.run, args.scheme)["none"]
    writer = SAMark(key, SAMarkConfig.of(channels=args.channels), embedder=embedder)
    flags = run_flags(args.run, args.scheme, writer)
    items = sorted(i for i in texts if texts[i].strip())
    embedded = embed_sentences(embedder, [texts[i] for i in items])
    marked = {i: e for i, (_, e) in zip(items, embedded, strict=True)}
    by_flags: dict[tuple[int, ...], list[str]] = defaultdict(list)
    for i in items:
        by_flags[flags[i]].append(i)

    _, sentences, vectors = stored_test_corpora(embedder)
    pool = [s for ss in sentences for s in ss]
    human_mean = vectors.mean(axis=0)
    bounds = np.cumsum([0, *map(len, sentences)])
    text_means = np.stack([vectors[a:b].mean(axis=0) for a, b in itertools.pairwise(bounds)])
    human_scatter = np.cov(text_means.T)
    print(
        f"{len(items)} {args.scheme} texts of {args.run} (flag groups: "
        f"{', '.join(f'{f}: {len(v)}' for f, v in sorted(by_flags.items()))}); "
        f"forging from {len(pool)} human sentences",
        flush=True,
    )

    def forge(direction: np.ndarray) -> float:
        chosen = np.argsort(-(vectors @ direction))[: args.sentences]
        return detector.detect(" ".join(pool[j] for j in chosen)).p_value

    def leaked(direction: np.ndarray) -> float:
        """The share of the direction inside the key's pivot span (|cos| to the span)."""
        return float(np.linalg.norm(pivots @ (direction / np.linalg.norm(direction))))

    rng = np.random.default_rng(args.seed)
    rows: list[dict[str, Any]] = []

    def report(setting: str, n: int, p: list[float], cos: list[float]) -> None:
        row = {
            "setting": setting,
            "texts": n,
            "draws": len(p),
            "forged": float(np.mean(np.asarray(p) < ALPHA)),
            "median_p": float(np.median(p)),
            "cosine_to_key": float(np.mean(cos)),
        }
        rows.append(row)
        print(
            f"{setting:14} {n:>3} texts: forged {100 * row['forged']:5.1f}% of {len(p)}, "
            f"median p {row['median_p']:.3f}, cosine to the key {row['cosine_to_key']:.3f}",
            flush=True,
        )

    if "control" in args.settings:
        p0, c0 = [], []
        for _ in range(args.draws):
            d = rng.standard_normal(embedder.dim)
            p0.append(forge(d))
            c0.append(leaked(d))
        report("no marked text", 0, p0, c0)

    def mean_direction(chosen: np.ndarray) -> np.ndarray:
        return np.concatenate([marked[i] for i in chosen]).mean(axis=0) - human_mean

    def scatter_direction(chosen: np.ndarray) -> np.ndarray:
        dev = np.stack([marked[i].mean(axis=0) for i in chosen]) - human_mean
        return np.linalg.eigh(dev.T @ dev / len(chosen) - human_scatter)[1][:, -1]

    def attack(
        setting: str,
        groups: list[list[str]],
        counts: str,
        direction: Callable[[np.ndarray], np.ndarray],
    ) -> None:
        for n in [int(x) for x in counts.split(",")]:
            usable = [g for g in groups if len(g) >= n]
            if not usable:
                continue
            p, cos = [], []
            for _ in range(args.draws):
                group = usable[rng.integers(len(usable))]
                d = direction(rng.choice(group, size=n, replace=False))
                p.append(forge(d))
                cos.append(leaked(d))
            report(setting, n, p, cos)

    if "fixed" in args.settings:  # a flag payload: every text of one value, one pattern
        attack("fixed flags", list(by_flags.values()), args.counts, mean_direction)
    if "relative" in args.settings:
        # a relative flag payload: the flags relative to the first one (c - 1 bits), the
        # first drawn per text, so the texts of one value lean to two opposite orthants
        # and their mean cancels; the forger takes the scatter's top direction
        by_relative: dict[tuple[int, ...], list[str]] = defaultdict(list)
        for i in items:
            by_relative[tuple(f * flags[i][0] for f in flags[i][1:])].append(i)
        attack("relative flags", list(by_relative.values()), args.counts, scatter_direction)
    if "random" in args.settings:  # no flag payload (Alg. 1): any flags
        attack("random flags", [items], args.random_counts, scatter_direction)

    if args.plot:
        plot(rows, args.plot)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps({"run": str(args.run), "alpha": ALPHA, "rows": rows}, indent=1) + "\n"
        )


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Forged share (p < 0.01) against the marked texts the forger holds, per setting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=150)
    styles = {
        "fixed flags": ("#d62728", "o", "absolute flag payload (every text of a value alike)"),
        "relative flags": ("#1f77b4", "s", "relative flag payload (shipped)"),
        "random flags": ("#2ca02c", "^", "no flag payload (Alg. 1: any texts of the key)"),
    }
    for setting, (color, marker, label) in styles.items():
        pts = [(r["texts"], 100 * r["forged"]) for r in rows if r["setting"] == setting]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.plot(xs, ys, color=color, marker=marker, label=label, linewidth=2)
    control = [100 * r["forged"] for r in rows if r["setting"] == "no marked text"]
    if control:
        ax.axhline(control[0], color="grey", linestyle="--", label="no marked text (control)")
    ax.axhline(100 * ALPHA, color="black", linestyle=":", linewidth=1, label="alpha = 1%")
    ax.set_xscale("log", base=2)
    counts = sorted({r["texts"] for r in rows if r["texts"] > 0})
    ax.set_xticks(counts, [str(c) for c in counts])
    ax.set_xlabel("marked texts the forger holds (of one payload value)")
    ax.set_ylabel("forged human texts detected (p < 0.01), %")
    ax.set_title("What a flag payload gives away to averaging")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, frameon=True)
    top = max([r["forged"] for r in rows] + [0.1]) * 100
    ax.set_ylim(-top * 0.04, top * 1.45)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    main()
