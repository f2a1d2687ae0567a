"""The semantic layer alone, at 3 and 6 sentences: how a cheaper design is judged (issue 63).

A 12-sentence text is carried by the token layer whatever the semantic layer does, so a
design that weakens the semantic mark looks level on the paper protocol's columns. This
reads a run's length records (``lengths.jsonl``: each text's first 3, 6, 9 sentences,
attacked and not, scored by the row's own detector) and prints, per row, attack and
length, the share of texts whose **semantic p-value alone** is below ``--alpha``, and the
combined p-value's share beside it; with ``--against ROW``, each row's difference from that
row paired on the same texts, with a 95% bootstrap interval over texts and the discordant
counts (found only by this row / only by the other).

    python -m benchmarks.studies.semantic_at_lengths experiments/runs/default \\
        --rows "samark-layered (default)" "N = 64" "N = 16" --against "N = 64"
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np


def load(run: Path) -> dict[tuple[str, str, int], dict[str, tuple[float, float]]]:
    """(row, attack, sentences) -> item -> (semantic p, combined p): the length records,
    and the whole texts' detections at the experiment's length."""
    import tomllib

    full = int(tomllib.loads((run / "experiment.toml").read_text())["dataset"]["sentences"])
    out: dict[tuple[str, str, int], dict[str, tuple[float, float]]] = defaultdict(dict)
    for name in ("lengths.jsonl", "detections.jsonl"):
        if not (run / name).exists():
            continue
        for line in (run / name).open():
            r = json.loads(line)
            key = r["key"]
            if key[0] not in ("length", "detect") or r.get("scheme") in (None, "human"):
                continue
            p_sem = (r.get("details") or {}).get("p_semantic")
            if p_sem is None or r.get("p_value") is None:
                continue
            m = int(key[-1]) if key[0] == "length" else full
            out[(r["scheme"], r["attack"], m)][r["item"]] = (p_sem, r["p_value"])
    return out


def paired(
    a: dict[str, bool], b: dict[str, bool], rng: np.random.Generator, reps: int = 2000
) -> tuple[float, float, float, int, int]:
    items = sorted(set(a) & set(b))
    x = np.array([a[i] for i in items], float) - np.array([b[i] for i in items], float)
    boots = rng.choice(x, (reps, len(x))).mean(axis=1)
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return 100 * x.mean(), 100 * lo, 100 * hi, int((x > 0).sum()), int((x < 0).sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--rows", nargs="+", required=True)
    ap.add_argument("--against", default=None)
    ap.add_argument("--lengths", nargs="+", type=int, default=[3, 6])
    ap.add_argument("--alpha", type=float, default=0.01)
    args = ap.parse_args()
    data = load(args.run)
    attacks = sorted({k[1] for k in data})
    rng = np.random.default_rng(0)
    head = "| row | attack | sentences | n | semantic alone | combined |"
    sep = "|---|---|---|---|---|---|"
    if args.against:
        head += f" semantic vs {args.against} (95% CI; only this / only other) |"
        sep += "---|"
    print(f"p < {args.alpha}, share of texts (%), {args.run}\n\n{head}\n{sep}")
    for attack in attacks:
        for m in args.lengths:
            for row in args.rows:
                got = data.get((row, attack, m))
                if not got:
                    continue
                sem = {i: v[0] < args.alpha for i, v in got.items()}
                comb = {i: v[1] < args.alpha for i, v in got.items()}
                line = (
                    f"| {row} | {attack} | {m} | {len(got)} | "
                    f"{100 * np.mean(list(sem.values())):.1f} | "
                    f"{100 * np.mean(list(comb.values())):.1f} |"
                )
                other = data.get((args.against, attack, m)) if args.against else None
                if other and row != args.against:
                    d, lo, hi, only_a, only_b = paired(
                        sem, {i: v[0] < args.alpha for i, v in other.items()}, rng
                    )
                    line += f" {d:+.1f} [{lo:+.1f}, {hi:+.1f}]; {only_a} / {only_b} |"
                elif args.against:
                    line += " |"
                print(line)


if __name__ == "__main__":
    main()
