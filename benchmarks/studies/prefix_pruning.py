"""Pruning early on partial-sentence embeddings, replayed offline on recorded candidate
pools (issue 55; no LLM generation).

Design: draw N candidate rows, decode only their first k generator tokens, embed those
prefixes, keep the M rows whose prefix scores best, and decode only those to the end; the
step then picks among the kept rows (and the rows that had already ended a sentence within
k tokens) exactly as the layered mark does (hard filters, the flag match on the sentence's
own keyed cell, S = sum_j tanh(kappa r_j cos_j) + lambda_div D + lambda_nov N, softmax
pick). Compared with plain selection from N' candidates at the same token cost.

Data: ``experiments/runs/candidate-pools/pools.jsonl`` and ``pools-b.jsonl``
(candidate_pools.py: 40 CNN/DailyMail prompts, 6 steps each, 32 rows a step drawn by
SmolLM2-135M-Instruct after the plain trajectory's text; only the rows that ended a sentence
are written, the others are counted as rows that ran to the 64-token cap). Prefixes are the
candidate's first k tokens under the generator's tokenizer, decoded and stripped as the
engine's row pruning does. A keyed cell is read from the sentence's own embedding
(``CellFrames.cell_of``), never from its context, so no context is needed for the cell;
the context only enters the hard filters (recorded per candidate, ``hard_ok``) and the
diversity and novelty terms, rebuilt from the prompt and the trajectory's earlier
continued sentences (the records' ``continued``).

Every metric is the expectation under the pick's law (softmax over the matched kept rows)
and over random draws of N rows from the step's 32 (N = 32: every row). The pools hold 32
rows a step, so N = 64 cannot be replayed: plain N = 32 is the reference, and a lower bound
on N = 64's picked-sentence quality. Keys are
made as ``samark keygen`` makes them (64 cells, the default embedder), each with both
per-generation signs. Quality of the picked sentence: S_wm, its pivot margin (its smallest
flag-signed cosine on its cell's pivots), its cell margin (cosine to its own anchor less
the next anchor's: distance from its cell's walls), and a modelled Doc-P evidence: the
chance it stays in its cell under paraphrase, Phi((m + mu) / 0.0162) with mu fitted so
that 71% of all candidates stay (cell-stability.txt), times E tanh(kappa (r_j cos_j + e))
with e ~ N(0, 0.0114) (a pivot cosine's move under paraphrase, same file).

    OMP_NUM_THREADS=1 python benchmarks/studies/prefix_pruning.py

Writes experiments/runs/candidate-pools/prefix-pruning.jsonl and .md; caches the
embeddings next to them (``prefix-pruning.<hash>.emb.npy``, not committed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import norm, spearmanr

from samark.schemes.samark.selection import semantic_similarity, vocabulary_novelty
from samark.text import words

POOLS = Path("experiments/runs/candidate-pools")
ROWS = 32  # rows drawn per step when the pools were recorded
CAP = 64  # max_sentence_tokens: a row that never ended a sentence decoded this many
KAPPA, EPSILON, LAMBDA_DIV, LAMBDA_NOV = 30.0, 10.0, 0.35, 0.2  # SAMarkConfig's defaults
CELLS, CHANNELS = 64, 2
MARGIN_MOVE_SD, COSINE_MOVE_SD, STAY = 0.0162, 0.0114, 0.71  # cell-stability.txt, 64 cells
SOFT_BETA = 100.0  # the soft-cell prefix score's temperature on anchor cosines (fixed a priori)
PREFIX_TOKENS = (4, 8, 12)
FRACTIONS = (0.25, 0.5)


@dataclass
class Step:
    prompt: int
    step: int
    texts: list[str]
    tokens: list[list[int]]  # generator tokens of each complete candidate
    hard_ok: np.ndarray
    diversity: np.ndarray
    novelty: np.ndarray
    rows: int  # rows drawn (complete + ran to the cap)
    continued: int  # the plain trajectory's continuation


def load_steps(prompts: int) -> list[Step]:
    """The recorded steps of ``prompts`` prompts spread over the 40, with their context
    terms rebuilt (novelty here; diversity once the sentences are embedded)."""
    by_prompt: dict[int, list[dict[str, Any]]] = {}
    for name in ("pools.jsonl", "pools-b.jsonl"):
        for line in (POOLS / name).open():
            s = json.loads(line)
            by_prompt.setdefault(s["prompt_index"], []).append(s)
    ids = sorted(by_prompt)
    chosen = [ids[round(i * (len(ids) - 1) / max(prompts - 1, 1))] for i in range(prompts)]
    out = []
    for p in dict.fromkeys(chosen):
        steps = sorted(by_prompt[p], key=lambda s: s["step"])
        vocabulary = set(words(steps[0]["prompt"]))
        for s in steps:
            out.append(
                Step(
                    prompt=p,
                    step=s["step"],
                    texts=s["candidates"],
                    tokens=[],
                    hard_ok=np.array(s["hard_ok"], dtype=bool),
                    diversity=np.zeros(0),
                    novelty=np.array([vocabulary_novelty(c, vocabulary) for c in s["candidates"]]),
                    rows=max(ROWS, len(s["candidates"])),
                    continued=s["continued"],
                )
            )
            vocabulary.update(words(s["candidates"][s["continued"]]))
    return out


def embed_all(embedder: Any, texts: list[str], label: str) -> np.ndarray:
    """Unit embeddings of ``texts`` (stripped, as the engine embeds), cached by content."""
    unique = list(dict.fromkeys(t.strip() or "." for t in texts))
    digest = hashlib.sha256("\x00".join([embedder.name, *unique]).encode()).hexdigest()[:16]
    cache = POOLS / f"prefix-pruning.{digest}.emb.npy"
    if cache.exists():
        table = np.load(cache).astype(np.float32)
    else:
        start = time.perf_counter()
        print(f"embedding {label}: {len(unique)} distinct texts", flush=True)
        embedder.progress_over = 1
        table = embedder.encode(unique).astype(np.float32)
        np.save(cache, table.astype(np.float16))
        print(f"  {time.perf_counter() - start:.0f} s", flush=True)
    table /= np.linalg.norm(table, axis=1, keepdims=True)
    index = {t: i for i, t in enumerate(unique)}
    return table[[index[t.strip() or "."] for t in texts]]


@dataclass
class Scored:
    """Per candidate (all steps concatenated) under one key: its cell, its flag-signed
    cosines on its own cell's pivots (c,), its cell margin, and the soft-cell signed
    cosines' tanh terms summed (a prefix scorer)."""

    cell: np.ndarray
    signed: np.ndarray
    margin: np.ndarray
    soft_score: np.ndarray | None


def score_under(frames: Any, emb: np.ndarray, soft: bool) -> Scored:
    cell = frames.cell_of(emb)[0]
    signed = frames.signed(emb)[0]
    anchor_cos = emb @ frames.anchors[0].T  # (n, M)
    top2 = np.sort(anchor_cos, axis=1)[:, -2:]
    margin = top2[:, 1] - top2[:, 0]
    soft_score = None
    if soft:
        m, c, d = frames.pivots.shape[1:]
        cos = (emb @ frames.pivots[0].reshape(m * c, d).T).reshape(-1, m, c) * frames.flags[0]
        w = np.exp(SOFT_BETA * (anchor_cos - anchor_cos.max(axis=1, keepdims=True)))
        w /= w.sum(axis=1, keepdims=True)
        # per sign s: sum_m w_m sum_j tanh(kappa s cos_mj); store both signs
        soft_score = np.stack(
            [np.einsum("nm,nm->n", w, np.tanh(KAPPA * s * cos).sum(axis=2)) for s in (1.0, -1.0)],
            axis=1,
        )
    return Scored(cell, signed.astype(np.float64), margin.astype(np.float64), soft_score)


def wm_score(signed: np.ndarray) -> np.ndarray:
    return np.tanh(KAPPA * signed).sum(axis=1)


# ---------------------------------------------------------------- designs
@dataclass(frozen=True)
class Design:
    name: str
    n: int
    k: int = 0  # prefix tokens (0: no pruning)
    fraction: float = 0.0  # prefix at this fraction of the sentence (oracle timing)
    keep: int = 0
    scorer: str = "own"  # own: the prefix's own cell; soft: softmax over cells

    @property
    def pruned(self) -> bool:
        return bool(self.k or self.fraction)

    @property
    def variant(self) -> str:
        return f"k{self.k}" if self.k else f"f{self.fraction}"


def designs() -> list[Design]:
    out = [Design(f"plain N={n}", n) for n in (4, 6, 8, 10, 12, 16, 24, 32)]
    for n in (16, 24, 32):
        for k in PREFIX_TOKENS:
            for m in (2, 4, 8):
                for sc in ("own", "soft"):
                    out.append(Design(f"N={n} k={k} M={m} {sc}", n, k=k, keep=m, scorer=sc))
    for f in FRACTIONS:
        for m in (4, 8):
            for sc in ("own", "soft"):
                out.append(
                    Design(
                        f"N=32 f={f} M={m} {sc} (oracle timing)", 32, fraction=f, keep=m, scorer=sc
                    )
                )
    return out


def tokenize(steps: list[Step]) -> Any:
    """Fill each step's ``tokens`` (the generator's tokens of each candidate); returns the
    generator's tokenizer."""
    from samark.models import generator_tokenizer, resolve_generator

    _, path = resolve_generator("smollm2-135m-instruct")
    tok = generator_tokenizer(str(path))
    for s in steps:
        s.tokens = [tok(t, add_special_tokens=False)["input_ids"] for t in s.texts]
    return tok


def add_diversity(steps: list[Step], full: np.ndarray) -> np.ndarray:
    """Fill each step's ``diversity`` (against the trajectory's earlier continued
    sentences), from the candidates' unit embeddings ``full`` (all steps concatenated);
    returns the steps' bounds in ``full``."""
    bounds = np.cumsum([0, *(len(s.texts) for s in steps)])
    history: list[np.ndarray] = []
    for i, s in enumerate(steps):
        if s.step == 0:
            history = []
        own = full[bounds[i] : bounds[i + 1]]
        past = np.array(history) if history else np.zeros((0, own.shape[1]))
        s.diversity = 1.0 - semantic_similarity(own.astype(np.float64), past)
        history.append(own[s.continued])
    return bounds


def stay_model(margin: np.ndarray) -> np.ndarray:
    """The Doc-P model's chance that each sentence keeps its cell under paraphrase:
    Phi((m + mu) / MARGIN_MOVE_SD), mu such that STAY of these candidates keep theirs."""
    lo, hi = -0.1, 0.1
    for _ in range(60):
        mu = (lo + hi) / 2
        lo, hi = (mu, hi) if norm.cdf((margin + mu) / MARGIN_MOVE_SD).mean() < STAY else (lo, mu)
    return norm.cdf((margin + mu) / MARGIN_MOVE_SD)


def docp_evidence(signed: np.ndarray, stay: np.ndarray) -> np.ndarray:
    """The Doc-P model's evidence of each sentence: ``stay`` times its channels' mean
    E tanh(kappa (r_j cos_j + e)), e ~ N(0, COSINE_MOVE_SD) (16-node Gauss-Hermite)."""
    nodes, gw = np.polynomial.hermite_e.hermegauss(16)
    gw = gw / gw.sum()
    moved = np.tanh(KAPPA * (signed[:, :, None] + COSINE_MOVE_SD * nodes)) @ gw
    return stay * moved.mean(axis=1)


def per_prompt_mean(
    weight: np.ndarray, values: np.ndarray, step_of: np.ndarray, prompt_of_step: np.ndarray
) -> np.ndarray:
    """The expected ``values`` (keys, 2, n) of the picked sentence under ``weight`` (the
    pick's law, same shape), per prompt (over keys, signs and the prompt's steps):
    ``step_of`` (n,) is each candidate's step, ``prompt_of_step`` each step's prompt."""
    n_steps = len(prompt_of_step)
    num = np.zeros((n_steps,))
    den = np.zeros((n_steps,))
    np.add.at(num, step_of, (weight * values).sum(axis=(0, 1)))
    np.add.at(den, step_of, weight.sum(axis=(0, 1)))
    per_step = num / np.maximum(den, 1e-12)
    return np.array([per_step[prompt_of_step == p].mean() for p in np.unique(prompt_of_step)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=26, help="of the 40 recorded (6 steps each)")
    parser.add_argument("--keys", type=int, default=4)
    parser.add_argument("--reps", type=int, default=12, help="random row draws per step and design")
    parser.add_argument("--seed", type=int, default=0, help="the row draws' seed (keys are fresh)")
    parser.add_argument("-o", "--output", default=str(POOLS / "prefix-pruning.jsonl"))
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from samark.embed import load_embedder, new_key
    from samark.schemes.samark.cells import key_cells

    t0 = time.perf_counter()
    steps = load_steps(args.prompts)
    tok = tokenize(steps)
    texts = [t for s in steps for t in s.texts]
    toks = [ids for s in steps for ids in s.tokens]
    lengths = np.array([len(i) for i in toks])
    print(
        f"{len(steps)} steps of {len({s.prompt for s in steps})} prompts, {len(texts)} complete "
        f"candidates (of {sum(s.rows for s in steps)} rows), mean {lengths.mean():.1f} tokens",
        flush=True,
    )
    prefix_len: dict[str, np.ndarray] = {f"k{k}": np.minimum(lengths, k) for k in PREFIX_TOKENS}
    for f in FRACTIONS:
        prefix_len[f"f{f}"] = np.clip(np.round(f * lengths).astype(int), 1, lengths)
    prefix_text = {
        v: [
            tok.decode(ids[:n]) if n < len(ids) else t
            for ids, n, t in zip(toks, ln, texts, strict=True)
        ]
        for v, ln in prefix_len.items()
    }
    embedder = load_embedder("all-mpnet-base-v2")
    emb = {"full": embed_all(embedder, texts, "full candidates")}
    for v, pt in prefix_text.items():
        emb[v] = embed_all(embedder, pt, f"prefixes {v}")

    bounds = add_diversity(steps, emb["full"])
    print(f"data ready in {time.perf_counter() - t0:.0f} s", flush=True)

    rng = np.random.default_rng(args.seed)
    all_designs = designs()
    # per design: pick weight per (key, sign, candidate), tokens drawn, draws
    weight = {d.name: np.zeros((args.keys, 2, len(texts))) for d in all_designs}
    tokens_drawn = {d.name: 0.0 for d in all_designs}
    draws = {d.name: 0 for d in all_designs}
    predict: list[dict[str, Any]] = []
    quality: dict[str, np.ndarray] = {}
    for key_no in range(args.keys):
        key = new_key(embedder)  # as `samark keygen` makes one; never printed
        frames = key_cells(key, embedder.dim, CELLS, CHANNELS)
        full = score_under(frames, emb["full"], soft=False)
        pre = {v: score_under(frames, emb[v], soft=True) for v in prefix_text}
        stay = stay_model(full.margin)
        for si, sign in enumerate((1.0, -1.0)):
            signed = sign * full.signed
            full_wm = wm_score(signed)
            matched_all = np.all(signed > 0, axis=1)
            q = {
                "wm": full_wm,
                "pivot_margin": signed.min(axis=1),
                "cell_margin": full.margin,
                "docp_evidence": docp_evidence(signed, stay),
                "matched": matched_all.astype(float),
                "length": lengths.astype(float),
            }
            for name, vals in q.items():
                quality.setdefault(name, np.zeros((args.keys, 2, len(texts))))[key_no, si] = vals
            prefix_scores = {}
            in_cell: dict[str, np.ndarray] = {}
            for v, p in pre.items():
                assert p.soft_score is not None
                prefix_scores[(v, "own")] = wm_score(sign * p.signed)
                prefix_scores[(v, "soft")] = p.soft_score[:, si]
                # the prefix's projection on the full sentence's own cell (as if the cell
                # were known): separates a wrong cell from a weak projection
                own_pivots = frames.pivots[0][full.cell]  # (n, c, d)
                in_cell[v] = (
                    sign * np.einsum("nd,ncd->nc", emb[v], own_pivots) * frames.flags[0][full.cell]
                )
            score_all = (
                full_wm
                + LAMBDA_DIV * np.concatenate([s.diversity for s in steps])
                + (LAMBDA_NOV * np.concatenate([s.novelty for s in steps]))
            )
            hard_all = np.concatenate([s.hard_ok for s in steps])
            # prediction: per variant, across candidates and within steps
            for v in prefix_text:
                for sc in ("own", "soft"):
                    ps = prefix_scores[(v, sc)]
                    within, recall4, recall8 = [], [], []
                    for i in range(len(steps)):
                        a, b = bounds[i], bounds[i + 1]
                        if b - a < 3:
                            continue
                        within.append(spearmanr(ps[a:b], full_wm[a:b]).statistic)
                        ok = hard_all[a:b] & matched_all[a:b]
                        if ok.any():
                            best = int(np.argmax(np.where(ok, score_all[a:b], -np.inf)))
                            order = np.argsort(-ps[a:b], kind="stable")
                            recall4.append(best in order[:4])
                            recall8.append(best in order[:8])
                    predict.append(
                        {
                            "key": key_no,
                            "sign": sign,
                            "variant": v,
                            "scorer": sc,
                            "same_cell": float(np.mean(pre[v].cell == full.cell)),
                            "pearson_wm": float(np.corrcoef(ps, full_wm)[0, 1]),
                            "pearson_pivot_margin": float(
                                np.corrcoef(ps, signed.min(axis=1))[0, 1]
                            ),
                            "spearman_within_step": float(np.nanmean(within)),
                            "winner_in_top4": float(np.mean(recall4)),
                            "winner_in_top8": float(np.mean(recall8)),
                            "sign_agree": float(
                                np.mean(np.sign(sign * pre[v].signed) == np.sign(signed))
                            ),
                            "pearson_cos_in_full_cell": float(
                                np.corrcoef(in_cell[v].ravel(), signed.ravel())[0, 1]
                            ),
                        }
                    )
            # selection replays
            for d in all_designs:
                reps = 1 if d.n == ROWS else args.reps
                for i, s in enumerate(steps):
                    a, b = bounds[i], bounds[i + 1]
                    m = b - a
                    for _ in range(reps):
                        if d.n == ROWS:
                            rows = np.arange(s.rows)
                        else:
                            rows = rng.choice(s.rows, d.n, replace=False)
                        cand = rows[
                            rows < m
                        ]  # complete candidates (local index); others ran to CAP
                        capped = int((rows >= m).sum())
                        ln = lengths[a + cand]
                        if not d.pruned:
                            kept = cand
                            cost = ln.sum() + capped * CAP
                        else:
                            plen = prefix_len[d.variant][a + cand]
                            done = ln <= plen
                            live = cand[~done]
                            order = np.argsort(
                                -prefix_scores[(d.variant, d.scorer)][a + live], kind="stable"
                            )
                            kept_live = live[order[: d.keep]]
                            kept = np.concatenate([cand[done], kept_live])
                            # capped rows have no text: counted as pruned at the prefix
                            cap_prefix = d.k if d.k else round(d.fraction * CAP)
                            cost = (
                                plen.sum()
                                + (
                                    lengths[a + kept_live] - prefix_len[d.variant][a + kept_live]
                                ).sum()
                                + capped * cap_prefix
                            )
                        tokens_drawn[d.name] += cost / reps
                        w = pick_law(kept, hard_all[a:b], matched_all[a:b], score_all[a:b])
                        if w is None:
                            continue
                        np.add.at(weight[d.name][key_no, si], a + kept, w / reps)
                        draws[d.name] += 1
            print(
                f"key {key_no + 1}/{args.keys}, sign {sign:+.0f}: replayed "
                f"({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    write(args, all_designs, weight, tokens_drawn, draws, quality, predict, steps, lengths)
    print(f"done in {time.perf_counter() - t0:.0f} s", flush=True)


def pick_law(
    kept: np.ndarray, hard: np.ndarray, matched: np.ndarray, score: np.ndarray
) -> np.ndarray | None:
    """The pick's law over ``kept`` (local indices): softmax(eps S) over the matched rows
    that pass the hard filters, else the best-scoring hard-filtered row, else the best."""
    if len(kept) == 0:
        return None
    ok = hard[kept] & matched[kept]
    w = np.zeros(len(kept))
    if ok.any():
        s = score[kept][ok]
        q = np.exp(EPSILON * (s - s.max()))
        w[ok] = q / q.sum()
    else:
        pool = hard[kept] if hard[kept].any() else np.ones(len(kept), dtype=bool)
        w[int(np.argmax(np.where(pool, score[kept], -np.inf)))] = 1.0
    return w


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    order = np.argsort(values)
    c = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(c, q * c[-1])])


def write(
    args: argparse.Namespace,
    all_designs: list[Design],
    weight: dict[str, np.ndarray],
    tokens_drawn: dict[str, float],
    draws: dict[str, int],
    quality: dict[str, np.ndarray],
    predict: list[dict[str, Any]],
    steps: list[Step],
    lengths: np.ndarray,
) -> None:
    out = Path(args.output)
    rows: list[dict[str, Any]] = []
    median_margin = float(np.median(quality["cell_margin"]))
    step_of = np.concatenate([np.full(len(st.texts), i) for i, st in enumerate(steps)])
    prompt_of_step = np.array([st.prompt for st in steps])

    def per_prompt(name: str, d: Design) -> np.ndarray:
        """The design's expected ``name`` of the picked sentence, per prompt (over keys,
        signs and the prompt's steps)."""
        return per_prompt_mean(weight[d.name], quality[name], step_of, prompt_of_step)

    by_name = {d.name: d for d in all_designs}
    refs = {n: per_prompt("docp_evidence", by_name[f"plain N={n}"]) for n in (16, 32)}
    for d in all_designs:
        w = weight[d.name].ravel()
        total = w.sum()

        def mean(name: str, w: np.ndarray = w, total: float = total) -> float:
            return float((quality[name].ravel() * w).sum() / total)

        kept_tokens = mean("length") * total
        rows.append(
            {
                "design": d.name,
                "n": d.n,
                "k": d.k,
                "fraction": d.fraction,
                "keep": d.keep,
                "scorer": d.scorer if d.pruned else None,
                "tok_out": tokens_drawn[d.name] / kept_tokens if total else math.nan,
                "matched": mean("matched"),
                "wm": mean("wm"),
                "pivot_margin_mean": mean("pivot_margin"),
                "pivot_margin_p10": weighted_quantile(quality["pivot_margin"].ravel(), w, 0.1),
                "pivot_margin_p50": weighted_quantile(quality["pivot_margin"].ravel(), w, 0.5),
                "cell_margin_p25": weighted_quantile(quality["cell_margin"].ravel(), w, 0.25),
                "cell_margin_p50": weighted_quantile(quality["cell_margin"].ravel(), w, 0.5),
                "cell_margin_above_median": float(
                    (w * (quality["cell_margin"].ravel() > median_margin)).sum() / total
                ),
                "docp_evidence": mean("docp_evidence"),
                **{
                    f"docp_minus_plain{n}": float(np.mean(per_prompt("docp_evidence", d) - ref))
                    for n, ref in refs.items()
                },
                **{
                    f"docp_minus_plain{n}_se": float(
                        np.std(per_prompt("docp_evidence", d) - ref, ddof=1) / np.sqrt(len(ref))
                    )
                    for n, ref in refs.items()
                },
                "steps_replayed": draws[d.name],
            }
        )
    pred_rows: list[dict[str, Any]] = []
    for v in sorted({p["variant"] for p in predict}, key=lambda x: (x[0], float(x[1:]))):
        for sc in ("own", "soft"):
            sel = [p for p in predict if p["variant"] == v and p["scorer"] == sc]
            agg = {
                k: float(np.mean([p[k] for p in sel]))
                for k in sel[0]
                if k not in ("key", "sign", "variant", "scorer")
            }
            pred_rows.append({"kind": "prediction", "variant": v, "scorer": sc, **agg})
    with out.open("w") as f:
        meta = {
            "kind": "meta",
            "prompts": len({s.prompt for s in steps}),
            "steps": len(steps),
            "candidates": len(lengths),
            "keys": args.keys,
            "reps": args.reps,
            "seed": args.seed,
            "mean_tokens": float(lengths.mean()),
            "median_cell_margin_all_candidates": median_margin,
        }
        f.write(json.dumps(meta) + "\n")
        for r in pred_rows:
            f.write(json.dumps(r) + "\n")
        for r in rows:
            f.write(json.dumps({"kind": "design", **r}) + "\n")
    md = [
        f"Prefix pruning, replayed on {meta['steps']} recorded steps ({meta['prompts']} prompts, "
        f"{meta['candidates']} complete candidates, mean {meta['mean_tokens']:.1f} generator "
        f"tokens), {args.keys} fresh keys of 64 cells x 2 signs, {args.reps} row draws a step.",
        "",
        "How a prefix predicts its sentence (own: scored on the prefix's own cell; soft: "
        "softmax(100 anchor cosine) over cells):",
        "",
        "| prefix | scorer | same cell | r(S_wm) | r(pivot margin) | Spearman within step | "
        "sign agrees | r(cosines on the full's cell) | best in top 4 / top 8 of 32 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in pred_rows:
        md.append(
            f"| {r['variant']} | {r['scorer']} | {r['same_cell']:.2f} | {r['pearson_wm']:.2f} | "
            f"{r['pearson_pivot_margin']:.2f} | {r['spearman_within_step']:.2f} | "
            f"{r['sign_agree']:.2f} | {r['pearson_cos_in_full_cell']:.2f} | "
            f"{r['winner_in_top4']:.2f} / {r['winner_in_top8']:.2f} |"
        )
    md += [
        "",
        f"The picked sentence (expected under the pick's law; cell margin median over all "
        f"candidates {median_margin:.4f}; N = 64 cannot be replayed on 32-row pools; the "
        "last two columns: paired by prompt, mean difference and its standard error over "
        "prompts):",
        "",
        "| design | Tok/Out | matched | S_wm | pivot margin mean / p10 / p50 "
        "| cell margin p25 / p50 | cell margin > median | Doc-P evidence (model) "
        "| vs plain N=16 | vs plain N=32 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: r["tok_out"]):
        md.append(
            f"| {r['design']} | {r['tok_out']:.1f} | {100 * r['matched']:.1f}% | {r['wm']:.3f} | "
            f"{r['pivot_margin_mean']:.4f} / {r['pivot_margin_p10']:.4f} / "
            f"{r['pivot_margin_p50']:.4f} | {r['cell_margin_p25']:.4f} / "
            f"{r['cell_margin_p50']:.4f} | {100 * r['cell_margin_above_median']:.1f}% | "
            f"{r['docp_evidence']:.3f} | {r['docp_minus_plain16']:+.3f} "
            f"({r['docp_minus_plain16_se']:.3f}) | {r['docp_minus_plain32']:+.3f} "
            f"({r['docp_minus_plain32_se']:.3f}) |"
        )
    text = "\n".join(md) + "\n"
    out.with_suffix(".md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
