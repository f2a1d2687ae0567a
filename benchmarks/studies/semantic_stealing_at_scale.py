"""Semantic stealing at scale (issue 36): 10, 100 and 1,000 marked texts a key, fresh keys.

The `semantic-stealing` attacker learns a key's pivot plane from how n marked texts' mean
embeddings scatter beyond a reference (the public human pool, or unmarked texts it wrote
itself with the operator's generator), then assembles human sentences along it; the key's
own detectors (SAMark z and scan, the layered mark under Fisher and under ``both``) judge
the forgeries. Writing 1,000 SAMark texts a key is GPU work, so the marked texts are
simulated, and the simulation is checked against real ones:

- ``calibrate``: the paper run's real SAMark and layered texts' flag-signed pivot
  coordinates, sentence by sentence (what the selection moves), under its public key;
- ``simulate`` (``forge``): an unmarked text the same model wrote gets a real marked
  text's coordinates, and the rest of each embedding moves with them by a model
  ``gamma`` (0: not at all; 1: the Gaussian regression of an embedding on its coordinates
  under the within-text covariance; 3: three times that);
- ``validate``: the same attacker on the real texts and on simulated ones of the same key
  at n = 10 and 40: gamma 1 reproduces the real outcome, gamma 3 overstates it;
- ``table``: the cells and the plot.

    D=experiments/runs/semantic-stealing-at-scale
    python -m benchmarks.studies.semantic_stealing_at_scale embed $D --set base
    python -m benchmarks.studies.semantic_stealing_at_scale embed $D --set source-a
    python -m benchmarks.studies.semantic_stealing_at_scale calibrate $D
    python -m benchmarks.studies.semantic_stealing_at_scale validate $D
    python -m benchmarks.studies.semantic_stealing_at_scale forge $D --keys 8 --gamma 1
    python -m benchmarks.studies.semantic_stealing_at_scale table $D --plot $D/PLOT.png

The keys are research keys, a function of their index alone (sha256 of
``samark/semantic-stealing-at-scale/<i>``), built as the paper run's key: not secrets.
Results: docs/results/2026-11-27-semantic-stealing/README.md.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import itertools
import json
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

PAPER = Path("experiments/runs/paper")
ROWS = ("SAMark", "SAMark (layered)")  # the rows whose real texts calibrate the simulation
NS = (0, 10, 30, 100, 300, 1000)  # n = 0: the control, a random direction
ESTIMATORS = ("scatter", "orthant")
REFERENCES = ("pool", "unmarked")
ALPHA = 0.01
#: sentence embeddings kept across studies (filled where missing)
CACHE = Path.home() / ".cache/samark/research/paper-mpnet.npz"
SENTENCES = 12  # a forgery's sentences (the earlier semantic cells')

WRITTEN = Path("experiments/runs/stealing-at-scale/written")
#: the texts whose sentence embeddings the study needs: the attacker's own unmarked texts
#: (its reference) and an independent sample on the same prompts (the simulation's
#: sources: KGW texts, whose green list moves no sentence's meaning)
SETS = {"base": ("base", None, None), "source-a": ("marked", "kgw", 0)}


def _texts(written: Path, name: str) -> list[str]:
    file, scheme, key = SETS[name]
    with gzip.open(written / f"{file}.jsonl.gz", "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    if scheme is not None:
        rows = [r for r in rows if r["scheme"] == scheme and r["key"] == key]
    return [r["text"] for r in sorted(rows, key=lambda r: r["i"])]


def embed(args: argparse.Namespace) -> None:
    """Embed one set's sentences (all-mpnet-base-v2) into ``cache/<set>.npz`` (not
    committed: rebuilt in about 8 minutes a set on one CPU thread)."""
    from samark.embed import load_embedder
    from samark.segment import split_sentences

    embedder = load_embedder("all-mpnet-base-v2")
    texts = _texts(args.written, args.set)
    sentences = [split_sentences(t) for t in texts]
    flat = [s for ss in sentences for s in ss]
    out = np.empty((len(flat), embedder.dim), dtype=np.float32)
    start, step = time.perf_counter(), 500
    for a in range(0, len(flat), step):
        out[a : a + step] = embedder.encode(flat[a : a + step])
        done = min(a + step, len(flat))
        print(
            f"{args.set}: {done}/{len(flat)} sentences, {time.perf_counter() - start:.0f} s",
            flush=True,
        )
    path = args.dir / "cache" / f"{args.set}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, vectors=out, lengths=np.array([len(ss) for ss in sentences]))


def research_key(index: int, embedder: Any, avoided: Any) -> Any:
    """Repetition ``index``'s key, built as the paper run's public key is (its pivots
    avoid the same reference directions), from a public blob: for research only."""
    from samark.keys import WatermarkKey
    from samark.keys.samark_material import PivotDraw

    secret = hashlib.sha256(f"samark/semantic-stealing-at-scale/{index}".encode()).digest()
    return WatermarkKey(
        secret, embedder.identity, PivotDraw.avoiding(embedder.reference_directions(avoided))
    )


def _paper_schemes(run: Any, key: Any) -> dict[str, Any]:
    """The paper run's SAMark z, SAMark scan and layered rows, rebuilt under ``key``."""
    from samark.schemes import create_scheme
    from samark.schemes.base import SharedResources

    shared = SharedResources(run.experiment.generator, run.embedder)
    specs = {s.label: s for s in run.experiment.schemes}
    return {
        label: create_scheme(specs[label].name, key=key, shared=shared, **specs[label].params)
        for label in ("SAMark", "SAMark (scan)", "SAMark (layered)")
    }


class HumanPool:
    """The forger's public human text: the calibration corpora's sentences (per text and
    flat) with their stored embeddings."""

    def __init__(self, embedder: Any) -> None:
        from benchmarks.human_texts import stored_test_corpora

        _, self.texts, self.vectors = stored_test_corpora(embedder)
        self.sentences = [s for ss in self.texts for s in ss]

    def attack(self, run: Any, estimator: str, marked: list[np.ndarray], **kw: Any) -> Any:
        """The `semantic-stealing` attacker on these texts' embeddings (``marked``)."""
        from samark.evaluation.attacks import create_attack

        return create_attack(
            "semantic-stealing",
            embedder=run.experiment.embedder,
            estimator=estimator,
            pool_sentences=self.texts,
            pool_vectors=self.vectors,
            marked_vectors=marked,
            **kw,
        )

    def score(self, schemes: dict[str, Any], labels: Any, chosen: list[int]) -> dict[str, float]:
        """The forgery of pool sentences ``chosen`` under the detectors of rows ``labels``."""
        text = " ".join(self.sentences[c] for c in chosen)
        out: dict[str, float] = {}
        for label in labels:
            out |= _detect(schemes, label, self.vectors[chosen], text)
        return out


def _under_public_key(args: argparse.Namespace) -> tuple[Any, np.ndarray, Any, HumanPool, dict]:
    """The paper run, its public key's pivots, the sentence-embedding cache, the human
    pool and the run's detectors: what ``validate`` and ``real`` work with."""
    from benchmarks.studies.detection_statistics import EmbeddingCache
    from samark.evaluation.runner import Run

    run = Run.open(args.run)
    pivots = run.key.samark.pivots(run.embedder.dim, 2)
    cache = EmbeddingCache(args.cache, run.embedder)
    return run, pivots, cache, HumanPool(run.embedder), _paper_schemes(run, run.key)


def _load(dir_: Path, name: str) -> list[np.ndarray]:
    data = np.load(dir_ / "cache" / f"{name}.npz")
    bounds = np.cumsum([0, *data["lengths"]])
    vectors = data["vectors"].astype(np.float64)
    return [vectors[a:b] for a, b in itertools.pairwise(bounds)]


# -- calibrate: what SAMark's selection does to a sentence, on the paper run's real texts --
def calibrate(args: argparse.Namespace) -> None:
    """Each real SAMark (and layered) text's flag-signed pivot coordinates, sentence by
    sentence (12 x 2 a text), under the run's public key and the flags its seed drew:
    the part of a sentence embedding that the selection moves. Written to
    ``calibration.json`` with the same figures for the run's unmarked texts."""
    from benchmarks.keyring import run_flags
    from benchmarks.studies.detection_statistics import EmbeddingCache
    from samark.evaluation.runner import Run
    from samark.segment import split_sentences

    run = Run.open(args.run)
    embedder, key = run.embedder, run.key
    pivots = key.samark.pivots(embedder.dim, 2)
    cache = EmbeddingCache(args.cache, embedder)
    specs = {s.label: s for s in run.experiment.schemes}
    out: dict[str, Any] = {"run": str(args.run), "blocks": {}, "summary": {}}
    for label in (*ROWS, "Unwatermarked"):
        gens = [g for g in run.generations.records() if g.get("scheme") == label]
        texts = [(g, split_sentences(g["text"])) for g in gens]
        texts = [(g, ss) for g, ss in texts if ss]
        cache.fill([s for _, ss in texts for s in ss])
        if label == "Unwatermarked":
            coords = np.concatenate([cache.get(ss) @ pivots.T for _, ss in texts])
            means = np.stack([(cache.get(ss) @ pivots.T).mean(axis=0) for _, ss in texts])
        else:
            flags = run_flags(args.run, label, run.scheme(specs[label]))
            blocks = [
                (cache.get(ss) @ pivots.T) * np.asarray(flags[g["item"]], dtype=float)
                for g, ss in texts
            ]
            out["blocks"][label] = [np.round(b, 6).tolist() for b in blocks]
            coords = np.concatenate(blocks)
            means = np.stack([b.mean(axis=0) for b in blocks])
        out["summary"][label] = {
            "texts": len(texts),
            "sentences": len(coords),
            "coordinate_mean": coords.mean(axis=0).round(4).tolist(),
            "coordinate_sd": coords.std(axis=0).round(4).tolist(),
            "share_positive": (coords > 0).mean(axis=0).round(4).tolist(),
            "text_mean_sd": means.std(axis=0).round(4).tolist(),
        }
        print(label, json.dumps(out["summary"][label]), flush=True)
    (args.dir / "calibration.json").write_text(json.dumps(out) + "\n")


# -- the simulation --------------------------------------------------------------------
def within_scatter(texts: list[np.ndarray]) -> np.ndarray:
    """The pooled within-text covariance of sentence embeddings: how sentences on one topic
    vary about their text's mean (a stand-in for how a step's candidates vary)."""
    dev = np.concatenate([t - t.mean(axis=0) for t in texts if len(t) > 1])
    return np.asarray(dev.T @ dev / len(dev))


def lift(pivots: np.ndarray, scatter: np.ndarray | None) -> np.ndarray:
    """(c, dim): how a sentence's embedding moves when a selection moves its pivot
    coordinates by one unit. ``None``: along the pivots only. Else the regression of the
    whole vector on its coordinates under ``scatter`` (``(P S P^T)^-1 P S``): for Gaussian
    candidates, exactly how choosing among them by their coordinates moves the chosen one."""
    if scatter is None:
        return pivots
    ps = pivots @ scatter
    return np.asarray(np.linalg.solve(ps @ pivots.T, ps))


def moves_of(pivots: np.ndarray, scatter: np.ndarray, gamma: float) -> np.ndarray:
    """The selection's movement under model ``gamma``: 0 along the pivots only, 1 the
    Gaussian regression under ``scatter`` (:func:`lift`), larger: its off-plane part
    ``gamma`` times as large (the real texts leak between 1 and 3: ``validate``)."""
    return pivots + gamma * (lift(pivots, scatter) - pivots)


def simulate(
    sources: list[np.ndarray],
    blocks: list[np.ndarray],
    pivots: np.ndarray,
    rng: np.random.Generator,
    moves: np.ndarray | None = None,
) -> list[np.ndarray]:
    """Marked texts of the key with ``pivots``: each source text (unmarked sentences,
    (k, dim)) has its pivot-plane coordinates set to a real marked text's (a run of k
    consecutive sentences of a random calibration block, channels in a random order),
    signed by flags drawn per text; the change applied along ``moves`` (:func:`lift`;
    default: the pivots themselves), rows renormalised."""
    moves = pivots if moves is None else moves
    out = []
    for e in sources:
        k = len(e)
        block = blocks[rng.integers(len(blocks))]
        start = rng.integers(0, max(1, len(block) - k + 1))
        signed = block[start : start + k][:, rng.permutation(pivots.shape[0])]
        if len(signed) < k:  # a short block: its sentences again, in order
            signed = np.resize(signed, (k, signed.shape[1]))
        flags = rng.choice([-1.0, 1.0], size=pivots.shape[0])
        moved = e + (signed * flags - e @ pivots.T) @ moves
        out.append(moved / np.linalg.norm(moved, axis=1, keepdims=True))
    return out


def _leak(direction: np.ndarray, pivots: np.ndarray) -> float:
    """The share of a unit direction inside the key's pivot span (a truth the forger never
    sees; a random direction has about sqrt(c / dim))."""
    return float(np.linalg.norm(pivots @ direction))


# -- forge: the attacker of every cell, the key's own detectors -----------------------------
def _blocks(dir_: Path, label: str) -> list[np.ndarray]:
    cal = json.loads((dir_ / "calibration.json").read_text())
    return [np.asarray(b, dtype=np.float64) for b in cal["blocks"][label]]


def _detect(
    schemes: dict[str, Any], label: str, vectors: np.ndarray, text: str
) -> dict[str, float]:
    """A forgery's p-values under the row's detectors (the semantic layers scored on the
    pool's stored embeddings of its sentences; the token layer on its text)."""
    from samark.schemes.samark.layered import combine_p_values

    if label == "SAMark":
        return {
            "SAMark z": schemes["SAMark"].detector.score_embeddings(vectors).p_value,
            "SAMark scan": schemes["SAMark (scan)"].detector.score_embeddings(vectors).p_value,
        }
    layered = schemes["SAMark (layered)"]
    d = layered.combine_layers(layered.detector.score_embeddings(vectors), text)
    p_sem, p_tok = d.details["p_semantic"], d.details["p_token"]
    return {
        "layered fisher": d.p_value,
        "layered both": combine_p_values(p_sem, p_tok, method="both"),
        "layered semantic": p_sem,
        "layered token": p_tok,
    }


def forge(args: argparse.Namespace) -> None:
    """Every key's cells: simulated marked texts (from ``source-a``), the attacker's
    direction from the first n of them against the human pool or its own unmarked texts
    (``base``), ``--per-key`` forgeries a cell, each scored by the key's detectors."""
    from samark.evaluation.attacks.semantic_stealing import draw_forgery
    from samark.evaluation.runner import Run

    run = Run.open(args.run)
    embedder = run.embedder
    pool = HumanPool(embedder)
    sources, base = _load(args.dir, "source-a"), _load(args.dir, "base")
    sources = [e for e in sources if len(e)]
    base = [e for e in base if len(e)]
    scatter = within_scatter(base)
    blocks = {label: _blocks(args.dir, label) for label in ROWS}
    out = args.dir / "forgeries.jsonl"
    done = set()
    if out.exists():
        rows_ = map(json.loads, out.read_text().splitlines())
        done = {(r["gamma"], r["key"], r["row"]) for r in rows_}
    for index in range(args.first_key, args.first_key + args.keys):
        key = research_key(index, embedder, run.experiment.avoided_domains)
        pivots = key.samark.pivots(embedder.dim, 2)
        schemes = _paper_schemes(run, key)
        for label in ROWS:
            if (args.gamma, index, label) in done:
                continue
            start = time.perf_counter()
            rng = np.random.default_rng([index, ROWS.index(label)])
            order = rng.permutation(len(sources))
            moves = moves_of(pivots, scatter, args.gamma)
            marked = simulate([sources[i] for i in order], blocks[label], pivots, rng, moves)
            own = schemes["SAMark" if label == "SAMark" else "SAMark (layered)"].detector
            found = np.mean([own.score_embeddings(m).p_value < ALPHA for m in marked[:100]])
            rows = []
            for n, estimator, reference in itertools.product(NS, ESTIMATORS, REFERENCES):
                if n == 0 and (estimator, reference) != ESTIMATORS[:1] + REFERENCES[:1]:
                    continue
                if n == 0:  # the control: a random direction
                    d = rng.standard_normal(embedder.dim)
                    attack = None
                    direction = d / np.linalg.norm(d)
                    order_ = np.argsort(-(pool.vectors @ direction))
                else:
                    attack = pool.attack(
                        run,
                        estimator,
                        marked,
                        n=min(n, len(marked)),  # 1,000: the 990 sources with a sentence
                        unmarked_vectors=base if reference == "unmarked" else None,
                    )
                    direction = attack.direction
                for j in range(args.per_key):
                    r = random.Random(f"{index}/{label}/{n}/{estimator}/{reference}/{j}")
                    if attack is None:  # the attack's default spread
                        chosen = draw_forgery(order_, SENTENCES, 2, r)
                    else:
                        chosen = attack.forgery_indices(SENTENCES, r)
                    ps = pool.score(schemes, [label], chosen)
                    rows.append(
                        {
                            "gamma": args.gamma,
                            "key": index,
                            "row": label,
                            "n": n,
                            "n_used": min(n, len(marked)),
                            "estimator": estimator if n else "random",
                            "reference": reference if n else "-",
                            "forgery": j,
                            "leak": round(_leak(direction, pivots), 4),
                            "pool_sentences": [int(c) for c in chosen],
                            "p": {k: float(v) for k, v in ps.items()},
                            "own_texts_detected": float(found),
                        }
                    )
            with out.open("a", encoding="utf-8") as f:
                f.writelines(json.dumps(r) + "\n" for r in rows)
            print(
                f"key {index} {label}: {len(rows)} forgeries, its simulated texts detected "
                f"{100 * found:.0f}%, {time.perf_counter() - start:.0f} s",
                flush=True,
            )


# -- validate: the simulation against the real texts, under the run's own key ------------
def validate(args: argparse.Namespace) -> None:
    """Under the paper run's public key, the same attacker (human-pool reference) from n =
    10 and 40 of the row's real texts (their first 6 sentences, as the simulated texts
    have) and from n of its simulated texts: how much of the key each direction holds, and
    what its forgeries score. Where the two agree, the simulation stands in for texts this
    CPU cannot write. Written to ``validation.json``."""
    from samark.segment import split_sentences

    run, pivots, cache, pool, schemes = _under_public_key(args)
    sources = [e for e in _load(args.dir, "source-a") if len(e)]
    scatter = within_scatter(_load(args.dir, "base"))
    results: list[dict[str, Any]] = []
    for label in ROWS:
        gens = [g for g in run.generations.records() if g.get("scheme") == label]
        real = [cache.get(split_sentences(g["text"])[:6]) for g in gens if g["text"].strip()]
        rng = np.random.default_rng(7)
        blocks = _blocks(args.dir, label)
        sets = {"real": real}
        for gamma in args.gammas:
            moves = moves_of(pivots, scatter, gamma)
            sets[f"simulated (gamma {gamma:g})"] = simulate(sources, blocks, pivots, rng, moves)
        own = schemes[label].detector
        for name, texts in sets.items():
            found = float(np.mean([own.score_embeddings(t).p_value < ALPHA for t in texts]))
            plane = np.stack([np.linalg.norm(pivots @ t.mean(axis=0)) for t in texts])
            results.append(
                {
                    "row": label,
                    "texts": name,
                    "n": 0,
                    "own_texts_detected": found,
                    "text_mean_plane_norm": float(np.median(plane)),
                }
            )
            for n, estimator in itertools.product((10, 40), ESTIMATORS):
                leaks, ps = [], []
                draws = args.draws if n < len(texts) else 1
                for draw in range(draws):
                    chosen = rng.choice(len(texts), size=n, replace=False)
                    attack = pool.attack(run, estimator, [texts[i] for i in chosen])
                    leaks.append(_leak(attack.direction, pivots))
                    for j in range(max(1, args.forgeries // draws)):
                        picked = attack.forgery_indices(SENTENCES, random.Random(f"{draw}/{j}"))
                        ps.append(pool.score(schemes, [label], picked))
                row = {
                    "row": label,
                    "texts": name,
                    "n": n,
                    "estimator": estimator,
                    "directions": len(leaks),
                    "leak": float(np.mean(leaks)),
                    "forgeries": len(ps),
                }
                for det in ps[0]:
                    v = np.array([p[det] for p in ps])
                    row[det] = {
                        "detected": float(np.mean(v < ALPHA)),
                        "median_p": float(np.median(v)),
                    }
                results.append(row)
                print(json.dumps(row), flush=True)
    (args.dir / "validation.json").write_text(json.dumps(results, indent=1) + "\n")


# -- table: the cells, a markdown table and a plot ---------------------------------------
DETECTORS = ("SAMark z", "SAMark scan", "layered fisher", "layered both", "layered semantic")
ATTACKERS = {
    ("orthant", "unmarked"): "orthant, own unmarked texts",
    ("scatter", "unmarked"): "scatter, own unmarked texts",
    ("orthant", "pool"): "orthant, human pool",
    ("scatter", "pool"): "scatter, human pool",
}


def _cells(dir_: Path) -> dict[tuple[Any, ...], list[float]]:
    """(gamma, detector, n, estimator, reference) -> the forgeries' p-values."""
    cells: dict[tuple[Any, ...], list[float]] = {}
    for line in (dir_ / "forgeries.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        for det, p in r["p"].items():
            key = (r["gamma"], det, r["n"], r["estimator"], r["reference"])
            cells.setdefault(key, []).append(p)
            cells.setdefault(
                ("leak", r["gamma"], r["row"], r["n"], r["estimator"], r["reference"]), []
            ).append(r["leak"])
    return cells


def table(args: argparse.Namespace) -> None:
    """Markdown: per model of the selection (gamma), detector and attacker, the share of
    forgeries detected at p < 0.01 for each n (the control: n = 0, a random direction)."""
    cells = _cells(args.dir)
    gammas = sorted({k[0] for k in cells if k[0] != "leak"})
    ns = sorted({k[2] for k in cells if k[0] != "leak"})
    lines = []
    for gamma in gammas:
        lines += [
            f"### gamma = {gamma:g}",
            "",
            "| detector | attacker | " + " | ".join(f"n = {n:,}" for n in ns) + " |",
            "|---|---|" + "---|" * len(ns),
        ]
        for det in DETECTORS:
            for (est, ref), name in ATTACKERS.items():
                row = []
                for n in ns:
                    ps = cells.get(
                        (gamma, det, n, "random", "-") if n == 0 else (gamma, det, n, est, ref)
                    )
                    if not ps:
                        row.append("–")
                        continue
                    hit = np.asarray(ps) < ALPHA
                    row.append(
                        f"{100 * hit.mean():.1f} ({hit.sum()}/{len(ps)}; p {np.median(ps):.2g})"
                    )
                lines.append(f"| {det} | {name} | " + " | ".join(row) + " |")
        lines.append("")
    lines.append(
        "Share of the key's pivot span in the stolen direction (mean over keys; "
        "a random direction: about 0.05):"
    )
    lines.append("")
    for gamma in gammas:
        for label in ROWS:
            vals = []
            for n in ns[1:]:
                v = cells.get(("leak", gamma, label, n, "orthant", "unmarked"))
                vals.append(f"n = {n:,}: {np.mean(v[:: args.per_key]):.2f}" if v else "")
            lines.append(
                f"- gamma {gamma:g}, {label}, orthant vs own unmarked texts: " + ", ".join(vals)
            )
    print("\n".join(lines))
    if args.plot is not None:
        _plot(cells, gammas, ns, args.plot)


PANELS = {
    0.0: "moves pivot coordinates only: below the real texts",
    1.0: "+ their regression: as the real texts at n = 10, 40",
    3.0: "3x the regression: above the real texts",
}


def _plot(
    cells: dict[tuple[Any, ...], list[float]], gammas: list[float], ns: list[int], path: Path
) -> None:
    """Forged share against n, the strongest attacker (orthant, own unmarked texts), a
    panel per model of the selection."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    styles = {
        "SAMark z": ("#1f77b4", "o", "-"),
        "SAMark scan": ("#2ca02c", "s", "-"),
        "layered fisher": ("#d62728", "^", "-"),
        "layered both": ("#9467bd", "D", "--"),
    }
    xs = [n for n in ns if n]
    fig, axes = plt.subplots(1, len(gammas), figsize=(4.2 * len(gammas), 4.0), dpi=150, sharey=True)
    axes = np.atleast_1d(axes)
    for ax, gamma in zip(axes, gammas, strict=True):
        for det, (color, marker, ls) in styles.items():
            ys = [
                100
                * np.mean(
                    np.asarray(cells.get((gamma, det, n, "orthant", "unmarked"), [1.0])) < ALPHA
                )
                for n in xs
            ]
            ax.plot(xs, ys, color=color, marker=marker, ls=ls, label=det)
        ax.set_xscale("log")
        ax.set_xticks(xs, [f"{n:,}" for n in xs])
        ax.set_ylim(-3, 103)
        ax.axhline(1, color="grey", lw=0.8, ls=":")
        ax.set_title(PANELS.get(gamma, f"gamma {gamma:g}") + f" (gamma {gamma:g})", fontsize=8.5)
        ax.set_xlabel("marked texts the forger holds (n)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("forgeries detected at p < 0.01 (%)")
    axes[0].legend(fontsize=8, loc="upper left")
    fig.suptitle(
        "Semantic stealing at scale: the orthant estimator against the forger's own unmarked"
        " texts; simulated marked texts, 8 fresh keys, 40 forgeries a point",
        fontsize=9.5,
    )
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# -- real: every real text of the run's key, pooled across its SAMark rows ---------------
#: the paper run's rows written with its key in the full space with 2 channels and random
#: flags (SAMark's configurations and the layered mark's; not the dagger ablation)
REAL_ROWS = (
    "SAMark",
    "SAMark (adaptive)",
    "SAMark (layered)",
    "SAMark (margin)",
    "SAMark (pool margin)",
    "SAMark (N = 128)",
    "SAMark (N = 16)",
    "SAMark (N = 16 + steer)",
    "SAMark (layered N = 16)",
)
#: the run's texts without a semantic mark on the same prompts: the forger's own unmarked
#: texts (a token mark moves no sentence's meaning)
REFERENCE_ROWS = ("Unwatermarked", "KGW", "SynthID", "Unigram", "MorphMark", "EXP", "UPV")


def real(args: argparse.Namespace) -> None:
    """The attacker on real texts at the largest n the paper run holds: every text its key
    wrote in the SAMark rows (about 300, 12 sentences each), against the run's texts
    without a semantic mark on the same prompts (or the human pool); forgeries scored by
    the run's SAMark z, scan and layered detectors. Appended to ``real.jsonl``."""
    from samark.segment import split_sentences

    run, pivots, cache, pool, schemes = _under_public_key(args)

    def texts(rows: tuple[str, ...]) -> list[np.ndarray]:
        split = [
            split_sentences(g["text"])
            for g in run.generations.records()
            if g.get("scheme") in rows and isinstance(g.get("text"), str)
        ]
        split = [ss for ss in split if ss]
        cache.fill([s for ss in split for s in ss])
        return [cache.get(ss) for ss in split]

    marked, own = texts(REAL_ROWS), texts(REFERENCE_ROWS)
    print(f"{len(marked)} marked texts, {len(own)} reference texts", flush=True)
    rng = np.random.default_rng(11)
    with (args.dir / "real.jsonl").open("a", encoding="utf-8") as f:
        for n, estimator, reference in itertools.product(
            [int(x) for x in args.counts.split(",")] + [len(marked)], ESTIMATORS, REFERENCES
        ):
            draws = 1 if n >= len(marked) else args.draws
            for draw in range(draws):
                chosen = rng.choice(len(marked), size=min(n, len(marked)), replace=False)
                attack = pool.attack(
                    run,
                    estimator,
                    [marked[i] for i in chosen],
                    unmarked_vectors=own if reference == "unmarked" else None,
                )
                for j in range(args.forgeries // draws):
                    picked = attack.forgery_indices(SENTENCES, random.Random(f"{n}/{draw}/{j}"))
                    ps = pool.score(schemes, ROWS, picked)
                    row = {
                        "n": len(chosen),
                        "estimator": estimator,
                        "reference": reference,
                        "draw": draw,
                        "leak": round(_leak(attack.direction, pivots), 4),
                        "pool_sentences": [int(c) for c in picked],
                        "p": {k: float(v) for k, v in ps.items()},
                    }
                    f.write(json.dumps(row) + "\n")
            print(f"n = {len(chosen)}, {estimator}, {reference}: done", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="step", required=True)
    e = sub.add_parser("embed")
    e.add_argument("dir", type=Path)
    e.add_argument("--set", choices=sorted(SETS), required=True)
    e.add_argument("--written", type=Path, default=WRITTEN)
    c = sub.add_parser("calibrate")
    c.add_argument("dir", type=Path)
    c.add_argument("--run", type=Path, default=PAPER)
    c.add_argument(
        "--cache",
        type=Path,
        default=CACHE,
        help="sentence embeddings kept across studies (filled where missing)",
    )
    v = sub.add_parser("validate")
    v.add_argument("dir", type=Path)
    v.add_argument("--run", type=Path, default=PAPER)
    v.add_argument("--cache", type=Path, default=CACHE)
    v.add_argument("--draws", type=int, default=20, help="subsets of n texts (n < all)")
    v.add_argument("--forgeries", type=int, default=40, help="forgeries a cell")
    v.add_argument(
        "--gammas",
        nargs="+",
        type=float,
        default=[0.0, 1.0, 3.0],
        help="how a selection moves a sentence (moves_of)",
    )
    r = sub.add_parser("real")
    r.add_argument("dir", type=Path)
    r.add_argument("--run", type=Path, default=PAPER)
    r.add_argument("--cache", type=Path, default=CACHE)
    r.add_argument("--counts", default="40,100,200", help="n below all the run's texts")
    r.add_argument("--draws", type=int, default=8, help="subsets of n texts (n < all)")
    r.add_argument("--forgeries", type=int, default=40, help="forgeries a cell")
    f = sub.add_parser("forge")
    f.add_argument("dir", type=Path)
    f.add_argument("--run", type=Path, default=PAPER)
    f.add_argument("--keys", type=int, default=8)
    f.add_argument("--first-key", type=int, default=0)
    f.add_argument("--per-key", type=int, default=5, help="forgeries a key and cell")
    f.add_argument("--gamma", type=float, default=1.0, help="the selection's model (moves_of)")
    t = sub.add_parser("table")
    t.add_argument("dir", type=Path)
    t.add_argument("--plot", type=Path, default=None)
    t.add_argument("--per-key", type=int, default=5, help="forgeries a key and cell (as forge)")
    args = ap.parse_args()
    {
        "embed": embed,
        "calibrate": calibrate,
        "validate": validate,
        "forge": forge,
        "real": real,
        "table": table,
    }[args.step](args)


if __name__ == "__main__":
    main()
