"""Can a forger who must find the keyed cells steal them? Real sentence embeddings (issue 44).

``cell_stealing.py`` measured stealing in a synthetic embedding model, with a forger TOLD
every marked sentence's cell (an upper bound) and one who knows only the design ("blind",
one direction). Neither is the attacker to fear: a forger who knows the design
(Kerckhoffs) infers the cells from the texts themselves. Cells that survive a paraphrase
are regions of meaning, so neighbouring sentences share them: whoever holds enough
marked sentences near a sentence of their own can learn the lean there without knowing
where the keyed cells begin and end. That only shows in real geometry, so here:

- **Marked texts** of one key: SAMark's own selection (``selection_replay.replay``: the
  paper's filters, score and softmax) over the real candidate pools of
  ``candidate_pools.py`` (SmolLM2, 40 CNN/DailyMail prompts, 6 steps of 32 candidates,
  all-mpnet-base-v2), a prompt drawn at random for each text and a random sign a text.
- **The forger's own unmarked texts**: the same pools, one candidate drawn at random a
  step (the generator's plain sampling: a forger serving the same open weights).
- **The forger's human material**: the sentences of 150 other CNN/DailyMail articles.
- **Forgers**, every one told each marked text's random sign (beyond Kerckhoffs):
  ``oracle`` is told every sentence's cell (``cell_stealing.py``'s); ``blind`` learns one
  direction; ``kmeans-K`` clusters the marked and own sentences into K regions (spherical
  k-means) and learns a direction per region; ``knn-K`` learns, for each of its human
  sentences, the mean signed lean of its K nearest marked sentences against the mean of
  its K nearest own unmarked ones; ``moe-K``, the design-aware forger, fits the design's
  own model class (K learned anchors gating K learned leans, the anchors chosen to
  maximise the leans' cross-fitted strength: ``moe_scores``), and ``moe-oracle`` the
  same rule at the key's true anchors (a check that the rule can use the cells when it
  has them); ``ATTACKER:null`` is that forger given random signs (the chance level of
  its way of picking sentences). Each forged text is 6 human sentences drawn among the
  24 its rule scores highest (the ``semantic-stealing`` attack's rule).
- **Judge**: the key's detector, exact p-value over ``--nulls`` public cell sets.

The marked material is limited by the recorded pools: 240 pools, so at n = 1,000 texts
each pool is selected from about 25 times (the softmax and the sign vary the pick). The
curves compare forgers on equal material; ``cell_stealing.py`` gives the scale.

    python -m benchmarks.studies.cell_stealing_real experiments/runs/candidate-pools/pools.jsonl \\
        --keys 2 --cells 16 64 --ns 100 300 1000 \\
        --out experiments/runs/cell-stealing-real/forgeries.jsonl
    python -m benchmarks.studies.cell_stealing_real x \\
        --table experiments/runs/cell-stealing-real/forgeries.jsonl
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.studies.candidate_pools import load_pools
from benchmarks.studies.selection_replay import Design, frames_of, p_value, replay
from samark.schemes.samark.cells import CellFrames

SENTENCES = 6
#: the articles the forger writes from: after the first 50 (the prompts' articles)
HUMAN_ARTICLES = slice(50, 200)


def human_material(cache: Path) -> np.ndarray:
    """Unit embeddings of the human sentences the forger picks from (cached)."""
    if cache.exists():
        emb = np.load(cache).astype(np.float64)
    else:
        from samark.datasets import load_dataset
        from samark.embed import load_embedder
        from samark.segment import split_sentences

        docs = load_dataset("cnn_dailymail")[HUMAN_ARTICLES]
        sents = [s for d in docs for s in split_sentences(d.text) if len(s.split()) >= 5]
        emb = load_embedder("all-mpnet-base-v2").encode(sents).astype(np.float64)
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache, emb.astype(np.float16))
    return emb / np.linalg.norm(emb, axis=1, keepdims=True)


def marked_texts(
    prompts: list[list[dict[str, Any]]], key: CellFrames, design: Design, n: int, seed: int
) -> list[tuple[np.ndarray, float, int]]:
    """``n`` marked texts of the key: (6 sentence embeddings, the text's sign, its prompt)."""
    out = []
    rng = np.random.default_rng(seed)
    for _ in range(n):
        prompt = int(rng.integers(len(prompts)))
        steps = prompts[prompt]
        state = rng.bit_generator.state
        _, emb, _ = replay(steps, key, design, rng, SENTENCES, 32)
        # replay draws the sign first: read it back from the same stream
        sign = np.random.default_rng()
        sign.bit_generator.state = state
        out.append((emb, float(sign.choice([-1.0, 1.0], size=1)[0]), prompt))
    return out


def next_key_marked(
    prompts: list[list[dict[str, Any]]], keys: CellFrames, design: Design, k: int, n: int
) -> list[tuple[np.ndarray, float, int]]:
    """``n`` marked texts of the key after ``k`` in the draw (``:otherkey``'s decoy)."""
    j = (k + 1) % keys.count
    return marked_texts(prompts, keys[j : j + 1], design, n, seed=1000 + j)


def unmarked_texts(prompts: list[list[dict[str, Any]]], n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        steps = prompts[int(rng.integers(len(prompts)))]
        rows += [s["embeddings"][int(rng.integers(len(s["embeddings"])))] for s in steps[:6]]
    return np.asarray(rows, dtype=np.float64)


def spherical_kmeans(x: np.ndarray, k: int, seed: int, iters: int = 30) -> np.ndarray:
    """Centroids (k, dim) of unit vectors by cosine k-means (k-means++ start)."""
    rng = np.random.default_rng(seed)
    centres = [x[int(rng.integers(len(x)))]]
    for _ in range(k - 1):
        far = np.clip(1 - np.max(x @ np.asarray(centres).T, axis=1), 0.0, None)
        centres.append(x[int(rng.choice(len(x), p=far / far.sum()))])
    c = np.asarray(centres)
    for _ in range(iters):
        label = np.argmax(x @ c.T, axis=1)
        for j in range(k):
            if np.any(label == j):
                m = x[label == j].sum(axis=0)
                c[j] = m / np.linalg.norm(m)
    return c


def as_texts(rows: np.ndarray) -> np.ndarray:
    """Sentence rows cut into texts of ``SENTENCES`` (texts, SENTENCES, dim); a last
    incomplete text is dropped."""
    return rows[: len(rows) // SENTENCES * SENTENCES].reshape(-1, SENTENCES, rows.shape[1])


def region_means(own: np.ndarray, regions_own: np.ndarray, count: int) -> np.ndarray:
    """The mean of the forger's own unmarked sentences in each region (count, dim); all of
    them where a region holds none."""
    return np.stack(
        [
            own[regions_own == r].mean(axis=0) if np.any(regions_own == r) else own.mean(axis=0)
            for r in range(count)
        ]
    )


def regions_of(
    attacker: str, key: CellFrames, marked: np.ndarray, own: np.ndarray, seed: int
) -> tuple[int, Callable[[np.ndarray], np.ndarray]]:
    """A region forger's regions, (count, sentence embeddings -> region): the key's cells
    for ``oracle``, one for ``blind``, spherical k-means of the marked and own sentences
    for ``kmeans-K`` (K = 64 for a forger with no regions of its own)."""
    if attacker == "oracle":
        return key.cells, lambda x: key.cell_of(x.astype(np.float32))[0]
    if attacker == "blind":
        return 1, lambda x: np.zeros(len(x), dtype=int)
    kind, size = attacker.split("-")
    count = int(size) if kind == "kmeans" else 64
    centres = spherical_kmeans(np.concatenate([marked, own]), count, seed)
    return count, lambda x: np.argmax(x @ centres.T, axis=1)


def region_scores(
    regions_marked: np.ndarray,
    regions_own: np.ndarray,
    regions_human: np.ndarray,
    marked: np.ndarray,
    signs: np.ndarray,
    own: np.ndarray,
    human: np.ndarray,
    count: int,
) -> np.ndarray:
    """Each human sentence's score on its region's learned direction: the mean over the
    region's marked sentences of sign x (sentence - the region's own unmarked mean)."""
    scores = np.full(len(human), -np.inf)
    bases = region_means(own, regions_own, count)
    for r in range(count):
        in_marked = regions_marked == r
        if not in_marked.any():
            continue
        direction = (signs[in_marked, None] * (marked[in_marked] - bases[r])).mean(axis=0)
        sel = regions_human == r
        scores[sel] = human[sel] @ direction
    return scores


def knn_scores(
    marked: np.ndarray, signs: np.ndarray, own: np.ndarray, human: np.ndarray, k: int
) -> np.ndarray:
    """Each human sentence's score on its neighbourhood's learned lean."""
    k_m, k_o = min(k, len(marked)), min(k, len(own))
    near_m = np.argpartition(-(human @ marked.T), k_m - 1, axis=1)[:, :k_m]
    near_o = np.argpartition(-(human @ own.T), k_o - 1, axis=1)[:, :k_o]
    lean = (signs[near_m, None] * marked[near_m]).mean(axis=1)
    # a sign a text: the signed mean of the unmarked neighbourhood is what the signs carry
    # of the topic; removing the plain neighbourhood mean weighted by the signs' mean does it
    base = own[near_o].mean(axis=1) * signs[near_m].mean(axis=1, keepdims=True)
    return np.einsum("nd,nd->n", human, lean - base)


def moe_scores(
    marked: np.ndarray,
    signs: np.ndarray,
    prompts: np.ndarray,
    human: np.ndarray,
    experts: int,
    seed: int,
    steps: int = 300,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """The design-aware forger (Kerckhoffs): it knows that the key cuts meaning space into
    cells by nearest keyed anchor and gives each cell its own lean, so it searches for the
    anchors whose cells hold the most learnable lean. With soft cells g_m(x) =
    softmax(beta A x)_m, a cell's lean is the gated mean of sign x sentence; the forger
    maximises the lean's cross-fitted strength, sum_m n_m mu_m(part 1) . mu_m(part 2)
    over two thirds of its marked texts, split by prompt (unbiased: the parts' noise is
    independent, so only a lean both share counts; texts of one prompt share a candidate
    pool, whose own sign-dependent picks would otherwise look like a lean), and stops
    where the same strength between part 1 and the last third is largest (free anchors
    overfit the two parts they are fit on), by gradient ascent over A and beta from
    spherical k-means centres (or from ``start``). It then scores a sentence on its soft
    cells' leans learned from all its texts: with the key's anchors and a hard gate this is
    the oracle's rule."""
    import torch

    torch.manual_seed(seed)
    x = torch.tensor(marked, dtype=torch.float32)
    signed = x * torch.tensor(signs, dtype=torch.float32)[:, None]
    part = [torch.tensor(prompts % 3 == i) for i in range(3)]
    centres = spherical_kmeans(marked, experts, seed) if start is None else start
    anchors = torch.nn.Parameter(torch.tensor(centres, dtype=torch.float32))
    # a gate as sharp as the anchors' spread over the sentences: 4 of its standard
    # deviations of x . a is a near-hard nearest-anchor choice (random anchors in 768
    # dimensions meet a sentence at about +-0.04, k-means centres at 0.3-0.6)
    spread = float((x @ anchors.detach().T).std())
    log_beta = torch.nn.Parameter(torch.tensor(float(np.log(4.0 / spread))))
    opt = torch.optim.Adam([anchors, log_beta], lr=0.003)

    def leans(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        gate = torch.softmax(log_beta.exp() * (x[rows] @ anchors.T), dim=1)
        count = gate.sum(dim=0)
        return (gate.T @ signed[rows]) / count.clamp_min(1e-6)[:, None], count

    def strength(one: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        (lean_a, count_a), (lean_b, count_b) = leans(one), leans(other)
        return ((count_a + count_b) / 2 * (lean_a * lean_b).sum(dim=1)).sum()

    best, best_check = (anchors.detach().clone(), log_beta.detach().clone()), -float("inf")
    for _ in range(steps if start is None else 0):
        fit = strength(part[0], part[1])
        opt.zero_grad()
        (-fit).backward()
        opt.step()
        with torch.no_grad():
            check = float(strength(part[0], part[2]))
        if check > best_check:
            best, best_check = (anchors.detach().clone(), log_beta.detach().clone()), check
    with torch.no_grad():
        if start is None:
            anchors.copy_(best[0])
            log_beta.copy_(best[1])
        else:  # the key's anchors: the hard gate of the design itself
            log_beta.fill_(float(np.log(1e4)))
        lean, _ = leans(torch.ones(len(marked), dtype=torch.bool))
        h = torch.tensor(human, dtype=torch.float32)
        gate = torch.softmax(log_beta.exp() * (h @ anchors.T), dim=1)
        return (gate * (h @ lean.T)).sum(dim=1).numpy().astype(np.float64)


def infer_signs(
    attacker: str,
    key: CellFrames,
    marked: list[tuple[np.ndarray, float, int]],
    own: np.ndarray,
    seed: int,
    rounds: int = 10,
) -> tuple[np.ndarray, float]:
    """The forger that is NOT told the per-text signs (Kerckhoffs: it knows the design, not
    the key, and a sign is drawn afresh for every generation and never published): it
    infers them, as a latent variable, from the texts. It starts from the spectral guess (the
    leading eigenvector of the marked text means' covariance minus its own texts', where a
    hidden +-lean shows up as extra variance whatever its sign) and refines by EM with its
    own region model: learn a direction a region from one half of the prompts' texts under
    the current signs, set each text of the other half to the sign its sentences' scores
    sum to (cross-fitted, so a text's own sentences never vote for its own sign), and
    swap. Regions: the key's cells for ``oracle``, one for ``blind``, spherical k-means
    (K = 64 where the forger has no regions of its own) otherwise.

    Returns the inferred signs (one a text) and their agreement with the true ones,
    |mean(inferred x true)| (1: every sign right up to the one global flip the detector's
    vote does not care about; 0: no better than coin tosses)."""
    emb = [e for e, _, _ in marked]
    truth = np.array([s for _, s, _ in marked])
    fold = np.array([p % 2 for _, _, p in marked])
    dim = emb[0].shape[1]
    texts = np.stack([e.mean(axis=0) for e in emb])
    own_texts = as_texts(own).mean(axis=1)
    centre = own_texts.mean(axis=0)
    a, b = texts - centre, own_texts - centre
    extra = a.T @ a / len(a) - b.T @ b / len(b)
    _, vectors = np.linalg.eigh(extra)
    signs = np.sign(a @ vectors[:, -1])
    signs[signs == 0] = 1.0
    count, label = regions_of(attacker.split(":")[0], key, np.concatenate(emb), own, seed)
    regions = [label(e) for e in emb]
    own_means = region_means(own, label(own), count)
    for _ in range(rounds):
        new = signs.copy()
        for half in (0, 1):
            learn = np.flatnonzero(fold != half)
            sums = np.zeros((count, dim))
            for t in learn:
                np.add.at(sums, regions[t], signs[t] * (emb[t] - own_means[regions[t]]))
            for t in np.flatnonzero(fold == half):
                score = np.einsum("nd,nd->", emb[t] - own_means[regions[t]], sums[regions[t]])
                new[t] = 1.0 if score >= 0 else -1.0
        if np.array_equal(new, signs):
            break
        signs = new
    return signs, float(abs(np.mean(signs * truth)))


def forger_scores(
    attacker: str,
    key: CellFrames,
    marked: list[tuple[np.ndarray, float, int]],
    own: np.ndarray,
    human: np.ndarray,
    seed: int,
    decoy: np.ndarray | None = None,
    other_key: list[tuple[np.ndarray, float, int]] | None = None,
) -> np.ndarray:
    """A forger's score of each human sentence. ``ATTACKER:null`` is the same forger fed
    a random sign a text instead of the true ones: it learns nothing of the key but picks
    its sentences the same way (as coherent, as far from the topic mean), so its rate is
    the chance level that attacker's own rate must beat. ``ATTACKER:unmarked`` is the same
    forger fed ``decoy``, unmarked texts of the generator, in place of the marked ones, and
    ``ATTACKER:otherkey`` fed another key's marked texts (``other_key``: the same selection,
    filters and softmax, under a key that is not the judge's): the chance levels of a forger
    whose own fit (``:em``) finds directions of its own. What those forge is the judging
    key's lean towards human text so picked, not stolen."""
    if attacker.endswith(":otherkey"):  # another key's marked texts: its selection, not this key
        assert other_key is not None
        marked = other_key[: len(marked)]
        attacker = attacker.removesuffix(":otherkey")
    if attacker.endswith(":unmarked"):
        assert decoy is not None
        marked = [(t, 1.0, i) for i, t in enumerate(as_texts(decoy)[: len(marked)])]
        attacker = attacker.removesuffix(":unmarked")
    if attacker.endswith(":null"):
        rng = np.random.default_rng(seed + 99)
        marked = [(e, float(rng.choice([-1.0, 1.0])), p) for e, _, p in marked]
        attacker = attacker.removesuffix(":null")
    if attacker.endswith(":em"):
        inferred, agreement = infer_signs(attacker, key, marked, own, seed)
        print(f"  {attacker}: inferred signs agree with the true ones {agreement:.3f}", flush=True)
        marked = [(e, float(s), p) for (e, _, p), s in zip(marked, inferred, strict=True)]
        attacker = attacker.removesuffix(":em")
    emb = np.concatenate([e for e, _, _ in marked])
    signs = np.concatenate([np.full(len(e), s) for e, s, _ in marked])
    prompt = np.concatenate([np.full(len(e), p) for e, _, p in marked])
    if attacker in ("oracle", "blind") or attacker.startswith("kmeans-"):
        count, label = regions_of(attacker, key, emb, own, seed)
        return region_scores(label(emb), label(own), label(human), emb, signs, own, human, count)
    kind, size = attacker.split("-")
    if kind == "moe" and size == "oracle":
        anchors = key.anchors[0].astype(np.float64)
        return moe_scores(emb, signs, prompt, human, len(anchors), seed, start=anchors)
    if kind == "moe":
        return moe_scores(emb, signs, prompt, human, int(size), seed)
    return knn_scores(emb, signs, own, human, int(size))


def forge(
    frames: CellFrames, design: Design, scores: np.ndarray, human: np.ndarray, count: int, seed: int
) -> list[float]:
    rng = np.random.default_rng(seed)
    top = np.argsort(-scores)[: SENTENCES * 4]
    return [
        p_value(frames, human[rng.choice(top, size=SENTENCES, replace=False)], design)
        for _ in range(count)
    ]


def neighbour_cells(human: np.ndarray, cells_list: list[int], keys: int) -> None:
    """How often two human sentences share a keyed cell, by their cosine: what a forger who
    learns from its nearest marked neighbours can hope for (printed)."""
    sim = human @ human.T
    np.fill_diagonal(sim, -1.0)
    sim[sim > 0.999] = -1.0  # the same sentence twice
    order = np.argsort(-sim, axis=1)[:, :50]
    near = np.take_along_axis(sim, order, axis=1)
    bins = [0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    print(
        f"a human sentence's nearest other: cosine median {np.median(near[:, 0]):.2f}, "
        f"90th percentile {np.percentile(near[:, 0], 90):.2f}"
    )
    for cells in cells_list:
        frames = frames_of(Design("c", cells=cells), keys, seed=71)
        same, chance = [], []
        for k in range(keys):
            cell = CellFrames(
                frames.anchors[k : k + 1], frames.pivots[k : k + 1], frames.flags[k : k + 1]
            ).cell_of(human.astype(np.float32))[0]
            same.append(cell[order] == cell[:, None])
            chance.append(np.sum(np.bincount(cell, minlength=cells) ** 2) / len(cell) ** 2)
        s, cos = np.concatenate(same), np.tile(near, (keys, 1))
        shares = [
            f"{lo}-{hi}: {s[(cos >= lo) & (cos < hi)].mean():.2f}"
            for lo, hi in itertools.pairwise(bins)
        ]
        print(
            f"{cells} cells: same cell by cosine {'; '.join(shares)}; nearest "
            f"{s[:, 0].mean():.2f}, 25 nearest {s[:, :25].mean():.2f}, "
            f"two random sentences {np.mean(chance):.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records")
    parser.add_argument("--keys", type=int, default=2)
    parser.add_argument("--first-key", type=int, default=0, help="skip the keys before it")
    parser.add_argument(
        "--stop-key",
        type=int,
        default=None,
        help="stop before this key (the keys are drawn --keys at a time: a key's cells "
        "depend on --keys, so keep --keys to compare with another run)",
    )
    parser.add_argument("--cells", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--ns", type=int, nargs="+", default=[100, 300, 1000])
    parser.add_argument(
        "--attackers",
        nargs="+",
        default=["oracle", "blind", "kmeans-16", "kmeans-64", "kmeans-256", "knn-25", "knn-100"],
    )
    parser.add_argument("--forgeries", type=int, default=40)
    parser.add_argument(
        "--replicate",
        type=int,
        default=0,
        help="another draw of each forger's own randomness (its k-means start, the forgeries' "
        "sentences) on the same marked texts: a forger's rate on one key is one set of 24 "
        "sentences, so replicates tell a leak from a lucky set",
    )
    parser.add_argument("--nulls", type=int, default=999)
    parser.add_argument("--out")
    parser.add_argument("--table", help="print the table of a records file and stop")
    parser.add_argument(
        "--spread",
        nargs="+",
        help="records files: print each forger's rate over its (key, replicate) draws at the "
        "largest n, beside the same forger fed another key's texts (its chance level), "
        "and stop",
    )
    parser.add_argument(
        "--neighbours",
        action="store_true",
        help="print how often neighbouring human sentences share a cell, and stop",
    )
    args = parser.parse_args()
    if args.table:
        table(Path(args.table))
        return
    if args.spread:
        spread([Path(p) for p in args.spread])
        return
    prompts = load_pools(Path(args.records))
    out = Path(args.out) if args.out else None
    human = human_material((out.parent if out else Path(".")) / "human-sentences.emb.npy")
    print(f"{len(human)} human sentences for the forger", flush=True)
    if args.neighbours:
        neighbour_cells(human, [*args.cells, 256], keys=4)
        return
    for cells in args.cells:
        design = Design(f"cells {cells}", cells=cells)
        keys = frames_of(design, args.keys, seed=71)
        nulls = frames_of(design, args.nulls, seed=8)
        for k in range(args.first_key, args.stop_key or args.keys):
            start = time.perf_counter()
            key = keys[k : k + 1]
            frames = key.join(nulls)
            marked = marked_texts(prompts, key, design, max(args.ns), seed=1000 + k)
            own = unmarked_texts(prompts, max(args.ns), seed=2000 + k)
            decoy = unmarked_texts(prompts, max(args.ns), seed=3000 + k)
            other = (  # replayed once a key; each n takes its first texts, as marked does
                next_key_marked(prompts, keys, design, k, max(args.ns))
                if any(a.endswith(":otherkey") for a in args.attackers)
                else None
            )

            detected = np.mean(
                [p_value(frames, e, design) < 0.01 for e, _, _ in marked[: args.forgeries]]
            )
            # the forgeries' null: texts drawn the same way, among 24 human sentences of no
            # particular score
            chance = np.random.default_rng(k).random(len(human))
            human_p = forge(frames, design, chance, human, args.forgeries, k)
            print(
                f"cells {cells} key {k}: own texts detected {detected:.2f}, random human "
                f"texts {np.mean(np.array(human_p) < 0.01):.3f} "
                f"({time.perf_counter() - start:.0f} s)",
                flush=True,
            )
            for n in args.ns:
                for attacker in args.attackers:
                    scores = forger_scores(
                        attacker,
                        key,
                        marked[:n],
                        own[: n * SENTENCES],
                        human,
                        seed=k + 1000 * args.replicate,
                        decoy=decoy[: n * SENTENCES],
                        other_key=None if other is None else other[:n],
                    )
                    ps = forge(
                        frames,
                        design,
                        scores,
                        human,
                        args.forgeries,
                        seed=k * 7 + n + 1000 * args.replicate,
                    )
                    row = {
                        "cells": cells,
                        "key": k,
                        "n": n,
                        "attacker": attacker,
                        "replicate": args.replicate,
                        "forged": float(np.mean(np.array(ps) < 0.01)),
                        "own_detected": float(detected),
                        "p": ps,
                    }
                    print(
                        f"cells {cells:3d} key {k} n {n:5d} {attacker:10s}: forgeries detected "
                        f"{row['forged']:.3f} ({time.perf_counter() - start:.0f} s)",
                        flush=True,
                    )
                    if out:
                        out.parent.mkdir(parents=True, exist_ok=True)
                        with out.open("a") as f:
                            f.write(json.dumps(row) + "\n")


def table(path: Path) -> None:
    """Percent of forgeries detected at p < 0.01 by design, forger and n (keys pooled)."""
    rows = [json.loads(line) for line in path.open()]
    ns = sorted({r["n"] for r in rows})
    print("| design | forger | " + " | ".join(f"n = {n:,}" for n in ns) + " |")
    print("|---|---|" + "---|" * len(ns))
    for cells in sorted({r["cells"] for r in rows}):
        for attacker in dict.fromkeys(r["attacker"] for r in rows):
            sel = [r for r in rows if r["cells"] == cells and r["attacker"] == attacker]
            if not sel:
                continue
            keys = len({r["key"] for r in sel})
            vals = []
            for n in ns:
                v = [100 * r["forged"] for r in sel if r["n"] == n]
                vals.append(f"{np.mean(v):.1f} ({min(v):.0f}-{max(v):.0f})" if v else "")
            print(f"| {cells} cells | {attacker} ({keys} keys) | " + " | ".join(vals) + " |")


def spread(paths: list[Path], bar: float = 0.025) -> None:
    """Each forger's forged share over its draws (a draw: one key, one replicate of the
    forger's own randomness) at the largest n: a forger's draw is one set of 24 human
    sentences, so single draws are lumpy, and a forger that learned nothing of the key (fed
    another key's texts: ``:otherkey``) shows how lumpy by chance."""
    rows = [json.loads(line) for path in paths for line in path.open()]
    n = max(r["n"] for r in rows)
    draws: dict[str, dict[tuple[int, int], float]] = {}
    for r in rows:
        if r["n"] == n:
            draws.setdefault(r["attacker"], {})[(r["key"], r.get("replicate", 0))] = r["forged"]
    print(f"n = {n:,}; percent of forgeries detected at p < 0.01, over (key, replicate) draws")
    print(f"| forger | draws | keys | mean | median | max | draws over {100 * bar:g}% |")
    print("|---|---|---|---|---|---|---|")
    for attacker in sorted(draws, key=lambda a: (a.split(":")[0], a)):
        values = np.array(list(draws[attacker].values())) * 100
        keys = len({k for k, _ in draws[attacker]})
        print(
            f"| {attacker} | {len(values)} | {keys} | {values.mean():.1f} | "
            f"{np.median(values):.1f} | {values.max():.1f} | "
            f"{int(np.sum(values > 100 * bar))} |"
        )


if __name__ == "__main__":
    main()
