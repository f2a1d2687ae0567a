"""Can keyed cells be stolen? A design-aware forger against static pivots and cells (issue 44),
in a synthetic embedding model, at n = 10 to 1,000 marked texts of one key.

The model (the one tests/test_cells.py checks the power gap in, and which reproduces the
replay's gap on real pools, static 30-40% against cells 90-100% at 6 sentences): a text has
a topic; each of its 6 steps draws 32 candidates (unit vectors in 768-d sharing the topic,
pairwise cosine 0.5); the marked text picks per step the candidate whose weakest
flag-signed channel is largest (under its own cell's pivots for cells); the forger's own
unmarked texts pick a random candidate. Human sentences (the forger's material) come from
other topics.

The forger knows the design and, beyond Kerckhoffs, is handed what it would otherwise have
to infer: each marked sentence's cell (for cells) and each marked text's random signs (its
flag pattern for static pivots, its sign for cells). So it learns by the first moment:
for each cell (static: the one) and channel, the mean of sign-multiplied marked sentences
minus its own unmarked sentences' mean in the cell. It then scores every human sentence on
its own cell's learned direction and draws each forgery's 6 sentences among the 6 x 4 best
(the `semantic-stealing` attack's rule). An upper bound on a forger that must infer the
cells and signs; the key's detector (exact p-value over 499 null keys) judges.

    python -m benchmarks.studies.cell_stealing --keys 4 --ns 10 100 300 1000 \\
        --out experiments/runs/cell-stealing/forgeries.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from benchmarks.studies.selection_replay import Design, p_value
from samark.keys.pivots import PivotLaw
from samark.schemes.samark.cells import CellFrames, null_cells

DIM, SENTENCES, POOL, SHARE, CHANNELS = 768, 6, 32, 0.5, 2
LAW = PivotLaw.of("avoid", None)
#: "oracle": told every marked sentence's cell; "blind": knows the design and the signs,
#: not the keyed cells (learns one direction, as against static pivots)
ATTACKERS = ("oracle", "blind")


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def text_pools(rng: np.random.Generator) -> np.ndarray:
    """One text's candidate pools, (steps, pool, dim)."""
    topic = unit(rng.standard_normal(DIM))
    own = unit(rng.standard_normal((SENTENCES, POOL, DIM)))
    return unit(math.sqrt(SHARE) * topic + math.sqrt(1 - SHARE) * own)


def signs_of(cells: int, rng: np.random.Generator) -> np.ndarray:
    """A generation's random signs: c flags (static) or one sign (cells)."""
    return rng.choice([-1.0, 1.0], size=1 if cells else CHANNELS)


def flag_signed(key: CellFrames, emb: np.ndarray, cells: int, signs: np.ndarray) -> np.ndarray:
    """(n, c) cosines on each sentence's own cell's pivots signed by its flags."""
    if cells:
        return key.signed(emb)[0] * signs[0]
    return (emb @ key.pivots[0, 0].T) * signs[None, :]


def marked_text(
    key: CellFrames, cells: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    pools, signs = text_pools(rng), signs_of(cells, rng)
    picks = [p[np.argmax(flag_signed(key, p, cells, signs).min(axis=1))] for p in pools]
    return np.stack(picks), signs


def unmarked_text(rng: np.random.Generator) -> np.ndarray:
    pools = text_pools(rng)
    return pools[np.arange(SENTENCES), rng.integers(POOL, size=SENTENCES)]


def learn(
    marked: list[tuple[np.ndarray, np.ndarray]],
    cell_of: np.ndarray,
    unmarked: np.ndarray,
    unmarked_cells: np.ndarray,
    cells: int,
) -> np.ndarray:
    # cells = 0 with a cells design: the blind forger, every sentence in one cell
    """The forger's learned direction per (cell, channel), (M, c, dim): the mean over the
    cell's marked sentences of sign x (sentence - its own unmarked mean in the cell). With
    a random sign a text, the topic cancels and the mark remains. Cells have one sign a
    text, so a cell's channels share one learned direction (its flag-signed pivot sum)."""
    m_count = max(cells, 1)
    base = np.zeros((m_count, DIM))
    for m in range(m_count):
        if np.any(unmarked_cells == m):
            base[m] = unmarked[unmarked_cells == m].mean(axis=0)
    sums = np.zeros((m_count, CHANNELS, DIM))
    counts = np.zeros(m_count)
    start = 0
    for emb, signs in marked:
        text_cells = cell_of[start : start + len(emb)]
        start += len(emb)
        per_channel = np.repeat(signs, CHANNELS) if cells else signs
        for e, m in zip(emb, text_cells, strict=True):
            sums[m] += per_channel[:, None] * (e - base[m])[None, :]
            counts[m] += 1
    return sums / np.maximum(counts, 1)[:, None, None]


def forge(
    frames: CellFrames,
    cells: int,
    learned: np.ndarray,
    human: np.ndarray,
    human_cells: np.ndarray,
    forgeries: int,
    rng: np.random.Generator,
) -> list[float]:
    """p-values of ``forgeries`` forged texts of 6 human sentences."""
    scores = np.einsum("nd,ncd->nc", human, learned[human_cells]).min(axis=1)
    order = np.argsort(-scores)
    top = order[: SENTENCES * 4]
    design = Design("forged", cells=cells)
    return [
        p_value(frames, human[rng.choice(top, size=SENTENCES, replace=False)], design)
        for _ in range(forgeries)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=4)
    parser.add_argument("--ns", type=int, nargs="+", default=[10, 100, 300, 1000])
    parser.add_argument("--cells", type=int, nargs="+", default=[0, 16, 64])
    parser.add_argument("--forgeries", type=int, default=40)
    parser.add_argument("--out")
    parser.add_argument("--table", help="print the table of a records file and stop")
    parser.add_argument("--plot", help="with --table: also draw the curves into this PNG")
    args = parser.parse_args()
    if args.table:
        table(Path(args.table))
        if args.plot:
            plot(Path(args.table), Path(args.plot))
        return
    rng = np.random.default_rng(44)
    human = np.concatenate([unmarked_text(rng) for _ in range(1000)])  # other topics
    rows = []
    for cells in args.cells:
        nulls = null_cells(LAW, 499, DIM, max(cells, 1), CHANNELS, seed=8)
        for k in range(args.keys):
            start = time.perf_counter()
            key = null_cells(LAW, 1, DIM, max(cells, 1), CHANNELS, seed=1000 + k)
            krng = np.random.default_rng([k, cells])
            marked = [marked_text(key, cells, krng) for _ in range(max(args.ns))]
            own = np.concatenate([unmarked_text(krng) for _ in range(max(args.ns))])
            frames = key.join(nulls)  # the key's and the null cell sets, joined once a key
            design = Design("own", cells=cells)
            power = np.mean(
                [p_value(frames, emb, design) < 0.01 for emb, _ in marked[: args.forgeries]]
            )
            # static pivots are one cell: every sentence's cell is 0
            cell_of = key.cell_of(np.concatenate([e for e, _ in marked]))[0]
            own_cells = key.cell_of(own)[0]
            human_cells = key.cell_of(human)[0]
            for n, attacker in ((n, a) for n in args.ns for a in ATTACKERS):
                if attacker == "blind" and not cells:
                    continue  # static pivots have one cell: blind is the oracle
                told = attacker == "oracle"
                learned = learn(
                    marked[:n],
                    cell_of[: n * SENTENCES] if told else np.zeros(n * SENTENCES, dtype=int),
                    own,
                    own_cells if told else np.zeros(len(own), dtype=int),
                    cells if told else 0,
                )
                h_cells = human_cells if told else np.zeros(len(human), dtype=int)
                ps = forge(frames, cells, learned, human, h_cells, args.forgeries, krng)
                row = {
                    "cells": cells,
                    "attacker": attacker,
                    "key": k,
                    "n": n,
                    "forged": float(np.mean(np.array(ps) < 0.01)),
                    "own_detected": float(power),
                    "p": ps,
                }
                rows.append(row)
                print(
                    f"cells {cells:2d} {attacker:6s} key {k} n {n:5d}: forgeries detected "
                    f"{row['forged']:.3f} (own marked texts detected {power:.2f}) "
                    f"{time.perf_counter() - start:.0f} s",
                    flush=True,
                )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


def table(path: Path) -> None:
    """Percent of forgeries detected per design, forger and n (range over keys)."""
    rows = [json.loads(line) for line in path.open()]
    ns = sorted({r["n"] for r in rows})
    print("| design | forger | own texts detected | " + " | ".join(f"n = {n:,}" for n in ns) + " |")
    print("|---|---|---|" + "---|" * len(ns))
    for cells in sorted({r["cells"] for r in rows}):
        for attacker in ATTACKERS:
            sel = [r for r in rows if r["cells"] == cells and r["attacker"] == attacker]
            if not sel:
                continue
            name = f"{cells} cells" if cells else "static pivots (SAMark)"
            told = "signs" if not cells or attacker == "blind" else "cells and signs"
            own = 100 * np.mean([r["own_detected"] for r in sel])
            cells_of_n = []
            for n in ns:
                v = [100 * r["forged"] for r in sel if r["n"] == n]
                cells_of_n.append(f"{np.mean(v):.1f} ({min(v):.0f}-{max(v):.0f})")
            print(f"| {name} | told the {told} | {own:.0f}% | " + " | ".join(cells_of_n) + " |")


def plot(path: Path, out: Path) -> None:
    """Forgeries detected against n, one line per design and forger (mean over keys)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for line in path.open()]
    ns = sorted({r["n"] for r in rows})
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=130)
    styles = {
        0: ("black", "static pivots (SAMark)"),
        16: ("tab:blue", "16 cells"),
        64: ("tab:green", "64 cells"),
    }
    for cells, (colour, name) in styles.items():
        for attacker, dash in (("oracle", "-"), ("blind", ":")):
            sel = [r for r in rows if r["cells"] == cells and r["attacker"] == attacker]
            if not sel:
                continue
            ys = [100 * np.mean([r["forged"] for r in sel if r["n"] == n]) for n in ns]
            label = (
                name
                if not cells
                else f"{name}, forger told the {'cells' if attacker == 'oracle' else 'signs only'}"
            )
            ax.plot(ns, ys, dash, color=colour, marker="o", label=label)
    ax.axhline(2.5, color="grey", lw=0.8)
    ax.text(ns[0], 4, "1 of 40", color="grey", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("marked texts the forger holds (one key)")
    ax.set_ylabel("forgeries detected at p < 0.01 (%)")
    ax.set_title("Stealing the semantic mark: static pivots against keyed cells (synthetic model)")
    ax.set_ylim(-3, 103)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)


if __name__ == "__main__":
    main()
