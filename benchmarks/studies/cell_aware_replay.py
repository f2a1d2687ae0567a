"""The cell-aware pick (``SAMarkConfig.cell_margin_sd``), replayed offline on recorded
candidate pools (issue 55; no LLM generation).

With ``cell_margin_sd`` set, each candidate's watermark score S_wm is multiplied by
Phi(cell margin / cell_margin_sd), its cell margin being its cosine to its cell's anchor
less that to the runner-up's: the pick then prefers sentences far from their cell's walls,
which a paraphrase is less likely to move into another cell (where they carry no
evidence). Here the layered mark's pick (``SAMarkConfig()``'s kappa, epsilon, lambdas,
filters) is replayed with the library's own ``select(..., signed=..., stay=...)`` for plain
N in (4, 8, 16, 32) and cell_margin_sd in (None, 0.008, 0.016, 0.032), on the same
subsample, keys (64 cells, ``samark keygen``'s, both signs), row draws and quality model as
``benchmarks.studies.prefix_pruning`` (whose functions it imports): S_wm, pivot margin,
cell margin, and the modelled Doc-P evidence (Phi((m + mu) / 0.0162) times
E tanh(kappa (r_j cos_j + e)), e ~ N(0, 0.0114); cell-stability.txt).

Every metric is the expectation under the pick's law: ``select`` is called once per row
draw, and its law is rebuilt from what it returns (the matched candidates' terms,
``StepChoice.matched_terms``, through the library's ``softmax_weights``; its fallback pick
otherwise). The replay checks that ``select`` matched exactly the candidates this module
expects and scored them S_wm * Phi(m / sd). Hard filters are ``select``'s own, on the
context rebuilt from the prompt and the plain trajectory's earlier continued sentences
(their agreement with the recorded filters is printed). One row draw serves all four sd
values (paired). No extra batches (as prefix_pruning): a draw with no match takes
``select``'s fallback.

    OMP_NUM_THREADS=1 python -m benchmarks.studies.cell_aware_replay

Writes experiments/runs/candidate-pools/cell-aware-replay.jsonl and .md (reads the
embedding cache that prefix_pruning writes, ``prefix-pruning.<hash>.emb.npy``).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import ndtr

from benchmarks.studies import prefix_pruning as pp
from samark.schemes.samark.config import SAMarkConfig
from samark.schemes.samark.selection import (
    MATCHED,
    ngram_overlap,
    select,
    semantic_similarity,
    softmax_weights,
)
from samark.text import ngrams, words

NS = (4, 8, 16, 32)
SDS: tuple[float | None, ...] = (None, 0.008, 0.016, 0.032)


def design_name(n: int, sd: float | None) -> str:
    return f"plain N={n}" if sd is None else f"N={n} sd={sd:g}"


def contexts(
    steps: list[pp.Step], full: np.ndarray, bounds: np.ndarray, ngram_n: int
) -> list[tuple[set[tuple[str, ...]], set[str], np.ndarray]]:
    """Per step, the pick's context as the scheme builds it (``SAMark.begin``/``chosen``):
    the n-grams and vocabulary of the prompt and the continued sentences so far, and the
    continued sentences' embeddings."""
    prompts: dict[int, str] = {}
    for name in ("pools.jsonl", "pools-b.jsonl"):
        for line in (pp.POOLS / name).open():
            s = json.loads(line)
            prompts.setdefault(s["prompt_index"], s["prompt"])
    out = []
    context_words: list[str] = []
    history: list[np.ndarray] = []
    for i, s in enumerate(steps):
        if s.step == 0:
            context_words = words(prompts[s.prompt])
            history = []
        vocabulary = set(context_words)
        past = np.array(history) if history else np.zeros((0, full.shape[1]))
        out.append((set(ngrams(context_words, ngram_n)), vocabulary, past))
        context_words = context_words + words(s.texts[s.continued])
        history.append(full[bounds[i] + s.continued])
    return out


def hard_filters(
    steps: list[pp.Step],
    full: np.ndarray,
    bounds: np.ndarray,
    ctx: list[tuple[set[tuple[str, ...]], set[str], np.ndarray]],
    c: SAMarkConfig,
) -> np.ndarray:
    """Per candidate (all steps concatenated), whether it passes the library's hard
    filters (what ``select`` applies) in its step's context (:func:`contexts`)."""
    return np.concatenate(
        [
            np.array(
                [
                    ngram_overlap(t, g, c.selection.ngram_n) < c.selection.theta_ngram
                    for t in s.texts
                ]
            )
            & (semantic_similarity(full[bounds[i] : bounds[i + 1]], h) < c.selection.theta_sem)
            for i, (s, (g, _, h)) in enumerate(zip(steps, ctx, strict=True))
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--prompts",
        type=int,
        default=20,
        help="of the 40 recorded (6 steps each); 20: prefix-pruning.md's subsample",
    )
    parser.add_argument("--keys", type=int, default=4)
    parser.add_argument("--reps", type=int, default=12, help="random row draws per step and N")
    parser.add_argument("--seed", type=int, default=0, help="the row draws' seed (keys are fresh)")
    parser.add_argument("-o", "--output", default=str(pp.POOLS / "cell-aware-replay.jsonl"))
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from samark.embed import load_embedder, new_key
    from samark.schemes.samark.cells import key_cells

    c = SAMarkConfig()  # the layered default's selection settings
    t0 = time.perf_counter()
    steps = pp.load_steps(args.prompts)
    pp.tokenize(steps)
    texts = [t for s in steps for t in s.texts]
    lengths = np.array([len(ids) for s in steps for ids in s.tokens])
    embedder = load_embedder("all-mpnet-base-v2")
    full = pp.embed_all(embedder, texts, "full candidates")
    bounds = pp.add_diversity(steps, full)
    ctx = contexts(steps, full, bounds, c.selection.ngram_n)
    hard = hard_filters(steps, full, bounds, ctx, c)  # the library's, against the recorded
    recorded = np.concatenate([s.hard_ok for s in steps])
    agree = float(np.mean(hard == recorded))
    print(
        f"{len(steps)} steps of {len({s.prompt for s in steps})} prompts, {len(texts)} complete "
        f"candidates, mean {lengths.mean():.1f} tokens; hard filters agree with the recorded "
        f"ones on {100 * agree:.2f}% ({hard.mean():.3f} vs {recorded.mean():.3f} pass); "
        f"data ready in {time.perf_counter() - t0:.0f} s",
        flush=True,
    )

    names = [design_name(n, sd) for n in NS for sd in SDS]
    weight = {d: np.zeros((args.keys, 2, len(texts))) for d in names}
    tokens_drawn = dict.fromkeys(names, 0.0)
    draws = dict.fromkeys(names, 0)
    quality: dict[str, np.ndarray] = {}
    rng = np.random.default_rng(args.seed)
    pick_rng = np.random.default_rng(args.seed + 1)  # select's own draw (its law is used)
    checked = 0
    for key_no in range(args.keys):
        key = new_key(embedder)  # as `samark keygen` makes one; never printed
        frames = key_cells(key, embedder.dim, pp.CELLS, pp.CHANNELS)
        signed_key = frames.signed(full)[0]
        margin = frames.cell_margin(full)[0]  # the library's, as the scheme's pick reads it
        stay_model = pp.stay_model(margin)
        for si, sign in enumerate((1.0, -1.0)):
            signed = sign * signed_key  # scheme.pick: cells.signed(pool)[0] * flags[0]
            matched_all = np.all(signed > 0, axis=1)
            q = {
                "wm": pp.wm_score(signed),
                "pivot_margin": signed.min(axis=1),
                "cell_margin": margin,
                "stay_model": stay_model,
                "docp_evidence": pp.docp_evidence(signed, stay_model),
                "matched": (matched_all & hard).astype(float),
                "length": lengths.astype(float),
            }
            for name, vals in q.items():
                quality.setdefault(name, np.zeros((args.keys, 2, len(texts))))[key_no, si] = vals
            for n in NS:
                reps = 1 if n == pp.ROWS else args.reps
                for i, s in enumerate(steps):
                    a, b = bounds[i], bounds[i + 1]
                    g, vocabulary, history = ctx[i]
                    for _ in range(reps):
                        rows = (
                            np.arange(s.rows)
                            if n == pp.ROWS
                            else rng.choice(s.rows, n, replace=False)
                        )
                        cand = rows[rows < b - a]  # complete candidates; others ran to CAP
                        cost = lengths[a + cand].sum() + int((rows >= b - a).sum()) * pp.CAP
                        if len(cand) == 0:
                            for sd in SDS:
                                tokens_drawn[design_name(n, sd)] += cost / reps
                            continue
                        idx = a + cand
                        ok = hard[idx] & matched_all[idx]
                        for sd in SDS:
                            stay = None if sd is None else ndtr(margin[idx] / sd)
                            choice = select(
                                [texts[j] for j in idx],
                                full[idx],
                                None,
                                None,
                                g,
                                vocabulary,
                                history,
                                kappa=c.selection_kappa,
                                epsilon=c.selection.epsilon,
                                lambda_div=c.selection.lambda_div,
                                lambda_nov=c.selection.lambda_nov,
                                theta_sem=c.selection.theta_sem,
                                theta_ngram=c.selection.theta_ngram,
                                ngram_n=c.selection.ngram_n,
                                ngram_filter=c.selection.ngram_filter,
                                semantic_filter=c.selection.semantic_filter,
                                use_tanh=c.selection.tanh_generation,
                                saturation=c.research.adaptive_saturation,
                                margin_reference=c.research.margin_reference,
                                signed=signed[idx],
                                stay=stay,
                                rng=pick_rng,
                            )
                            w = np.zeros(len(idx))
                            if choice.kind == MATCHED:
                                terms = np.array(choice.matched_terms)
                                expect = q["wm"][idx][ok] * (1.0 if stay is None else stay[ok])
                                assert choice.n_matched == ok.sum() and ok[choice.index]
                                assert np.allclose(terms[:, 0], expect, atol=1e-6)
                                score = terms @ np.array(
                                    [1.0, c.selection.lambda_div, c.selection.lambda_nov]
                                )
                                w[ok] = softmax_weights(score, c.selection.epsilon)
                                checked += 1
                            else:
                                assert not ok.any()
                                w[choice.index] = 1.0
                            d = design_name(n, sd)
                            tokens_drawn[d] += cost / reps
                            np.add.at(weight[d][key_no, si], idx, w / reps)
                            draws[d] += 1
            print(
                f"key {key_no + 1}/{args.keys}, sign {sign:+.0f}: replayed "
                f"({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    print(f"{checked} matched picks checked against select's terms", flush=True)
    write(args, names, weight, tokens_drawn, draws, quality, steps, agree)
    print(f"done in {time.perf_counter() - t0:.0f} s", flush=True)


def write(
    args: argparse.Namespace,
    names: list[str],
    weight: dict[str, np.ndarray],
    tokens_drawn: dict[str, float],
    draws: dict[str, int],
    quality: dict[str, np.ndarray],
    steps: list[pp.Step],
    agree: float,
) -> None:
    out = Path(args.output)
    median_margin = float(np.median(quality["cell_margin"]))
    step_of = np.concatenate([np.full(len(st.texts), i) for i, st in enumerate(steps)])
    prompt_of_step = np.array([st.prompt for st in steps])

    def per_prompt(name: str, d: str) -> np.ndarray:
        return pp.per_prompt_mean(weight[d], quality[name], step_of, prompt_of_step)

    refs = {n: per_prompt("docp_evidence", design_name(n, None)) for n in (16, 32)}
    rows: list[dict[str, Any]] = []
    for n in NS:
        for sd in SDS:
            d = design_name(n, sd)
            w = weight[d].ravel()
            total = w.sum()

            def mean(name: str, w: np.ndarray = w, total: float = total) -> float:
                return float((quality[name].ravel() * w).sum() / total)

            docp = per_prompt("docp_evidence", d)
            rows.append(
                {
                    "design": d,
                    "n": n,
                    "cell_margin_sd": sd,
                    "tok_out": tokens_drawn[d] / (mean("length") * total) if total else math.nan,
                    "matched": mean("matched"),
                    "wm": mean("wm"),
                    "pivot_margin_mean": mean("pivot_margin"),
                    "pivot_margin_p10": pp.weighted_quantile(
                        quality["pivot_margin"].ravel(), w, 0.1
                    ),
                    "cell_margin_p50": pp.weighted_quantile(quality["cell_margin"].ravel(), w, 0.5),
                    "cell_margin_above_median": float(
                        (w * (quality["cell_margin"].ravel() > median_margin)).sum() / total
                    ),
                    "stay_model": mean("stay_model"),
                    "docp_evidence": mean("docp_evidence"),
                    **{
                        f"docp_minus_plain{k}": float(np.mean(docp - ref))
                        for k, ref in refs.items()
                    },
                    **{
                        f"docp_minus_plain{k}_se": float(
                            np.std(docp - ref, ddof=1) / np.sqrt(len(ref))
                        )
                        for k, ref in refs.items()
                    },
                    "steps_replayed": draws[d],
                }
            )
    meta = {
        "kind": "meta",
        "prompts": len({s.prompt for s in steps}),
        "steps": len(steps),
        "candidates": len(step_of),
        "keys": args.keys,
        "reps": args.reps,
        "seed": args.seed,
        "median_cell_margin_all_candidates": median_margin,
        "hard_filters_agree_with_recorded": agree,
    }
    with out.open("w") as f:
        f.write(json.dumps(meta) + "\n")
        for r in rows:
            f.write(json.dumps({"kind": "design", **r}) + "\n")
    md = [
        f"The cell-aware pick (cell_margin_sd), replayed with the library's select on "
        f"{meta['steps']} recorded steps ({meta['prompts']} prompts, {meta['candidates']} "
        f"complete candidates), {args.keys} fresh keys of 64 cells x 2 signs, {args.reps} row "
        f"draws a step (shared by the four sd values); hard filters select's own "
        f"({100 * agree:.1f}% agree with the recorded ones). Expected under the pick's law; "
        f"cell margin median over all candidates {median_margin:.4f}; stay and Doc-P evidence "
        "are the model's (prefix_pruning); the last two columns: paired by prompt, mean "
        "difference and its standard error over prompts.",
        "",
        "| design | Tok/Out | matched | S_wm | pivot margin mean / p10 | cell margin p50 "
        "| cell margin > median | stay (model) | Doc-P evidence (model) | vs plain N=16 "
        "| vs plain N=32 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        md.append(
            f"| {r['design']} | {r['tok_out']:.1f} | {100 * r['matched']:.1f}% | {r['wm']:.3f} | "
            f"{r['pivot_margin_mean']:.4f} / {r['pivot_margin_p10']:.4f} | "
            f"{r['cell_margin_p50']:.4f} | {100 * r['cell_margin_above_median']:.1f}% | "
            f"{r['stay_model']:.3f} | {r['docp_evidence']:.3f} | "
            f"{r['docp_minus_plain16']:+.3f} ({r['docp_minus_plain16_se']:.3f}) | "
            f"{r['docp_minus_plain32']:+.3f} ({r['docp_minus_plain32_se']:.3f}) |"
        )
    text = "\n".join(md) + "\n"
    out.with_suffix(".md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
