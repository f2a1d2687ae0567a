"""Stopping a step once its evidence suffices (``SAMarkConfig.adaptive``), replayed offline
on recorded candidate pools with 64 keyed cells (issue 55; no LLM generation).

The adaptive budget draws ``adaptive_chunk`` rows at a time and stops once a matched
candidate is saturated (every channel's tanh(kappa r_j cos_j) >= ``adaptive_saturation``)
or, after ``adaptive_patience`` rows, once any candidate matches; else it goes on to the
fixed budget (here the pools' 32 rows). For i.i.d. draws a threshold rule buys a better
expected pick than best-of-N at the same mean number of draws (it spends rows where the
pool is poor and saves them where it is rich), so it is the natural candidate for "stop a
step once its evidence is enough". Issue 24 measured it with 16 static pivots (a real row
lost 2.5 points of Doc-P to plain N = 16 at Tok/Out 11.8 instead of 18.6); this replays it
with the layered default's 64 keyed cells, with the plain pick and the cell-aware pick
(``cell_margin_sd`` 0.016), on the same subsample, keys (``samark keygen``'s, both signs),
row draws and Doc-P model as ``benchmarks.studies.cell_aware_replay``.

For each step, key, sign and row permutation the pick's law (softmax(eps S) over the
matched, hard-filtered rows drawn so far, as ``select``; its fallback otherwise) is built
once per prefix of whole chunks, and each design stops at its own prefix. Tok/Out counts
every drawn row's tokens (a row that never ended a sentence: the cap). Metrics are the
expected S_wm and modelled Doc-P evidence of the pick, and each design's gain over the
plain frontier (plain N = 4 ... 32, interpolated in log Tok/Out) at its own Tok/Out.

    OMP_NUM_THREADS=1 python -m benchmarks.studies.stop_replay

Writes experiments/runs/candidate-pools/stop-replay.jsonl and .md (reads the embedding
cache that prefix_pruning writes).
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import ndtr

from benchmarks.studies import prefix_pruning as pp
from benchmarks.studies.cell_aware_replay import contexts, hard_filters
from samark.schemes.samark.config import SAMarkConfig

PLAIN = (4, 8, 12, 16, 24, 32)
CHUNKS = (4, 8)
SATURATIONS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.85)
PATIENCES = (16, 24, 32)
SDS: tuple[float | None, ...] = (None, 0.016)


@dataclass(frozen=True)
class Design:
    chunk: int  # 0: plain N (no stopping)
    n: int  # plain: N; adaptive: the cap (the pools' rows)
    saturation: float
    patience: int
    sd: float | None

    @property
    def name(self) -> str:
        pick = "" if self.sd is None else f", cell-aware {self.sd:g}"
        if self.chunk == 0:
            return f"plain N={self.n}{pick}"
        return (
            f"chunks of {self.chunk}, stop at sat {self.saturation:g} "
            f"(patience {self.patience}, cap {self.n}){pick}"
        )


def designs() -> list[Design]:
    out = [Design(0, n, 0.0, 0, sd) for sd in SDS for n in PLAIN]
    out += [
        Design(b, pp.ROWS, s, p, sd)
        for sd in SDS
        for b, s, p in itertools.product(CHUNKS, SATURATIONS, PATIENCES)
    ]
    return out


def stop_prefix(d: Design, n_matched: np.ndarray, n_saturated: np.ndarray) -> int:
    """The number of rows drawn when design ``d`` stops: ``n_matched[k]`` and
    ``n_saturated[k]`` count the first ``(k + 1) * d.chunk`` rows."""
    for k in range(len(n_matched)):
        drawn = (k + 1) * d.chunk
        if n_saturated[k] >= 1 or (drawn >= d.patience and n_matched[k] >= 1):
            return drawn
    return len(n_matched) * d.chunk


class Draw:
    """One step's rows in one random draw order: what any prefix of it costs, which
    complete candidates it holds, and where a stopping design ends it."""

    def __init__(
        self,
        order: np.ndarray,
        a: int,
        b: int,
        lengths: np.ndarray,
        matched: np.ndarray,
        saturated: np.ndarray,
    ) -> None:
        complete = order < b - a  # the others ran to the cap without ending a sentence
        cost = np.where(complete, lengths[a + np.minimum(order, b - a - 1)], pp.CAP)
        self.cum_cost = np.cumsum(cost)
        self.local = a + order[complete]  # complete candidates in draw order
        self.pos = np.flatnonzero(complete)  # their draw positions
        self.cum_matched = np.cumsum(matched[self.local])
        self.cum_saturated = np.cumsum(saturated[self.local], axis=0)  # (m, levels)

    def cost(self, drawn: int) -> float:
        return float(self.cum_cost[drawn - 1])

    def complete_among(self, drawn: int) -> np.ndarray:
        return self.local[self.pos < drawn]

    def stop(self, d: Design) -> int:
        """The rows drawn when design ``d`` stops."""
        level = SATURATIONS.index(d.saturation)
        n_matched, n_saturated = [], []
        for drawn in range(d.chunk, d.n + 1, d.chunk):
            k = int(np.searchsorted(self.pos, drawn))  # complete rows among the first
            n_matched.append(int(self.cum_matched[k - 1]) if k else 0)
            n_saturated.append(int(self.cum_saturated[k - 1, level]) if k else 0)
        return stop_prefix(d, np.array(n_matched), np.array(n_saturated))


def prepared(prompts: int, c: SAMarkConfig) -> tuple[Any, ...]:
    """The recorded steps of ``prompts`` prompts made ready for a replay: (steps, their
    complete candidates' texts, token lengths, the embedder, unit embeddings, the steps'
    bounds, the hard filters' verdicts, the context terms of the selection score)."""
    from samark.embed import load_embedder

    steps = pp.load_steps(prompts)
    pp.tokenize(steps)
    texts = [t for s in steps for t in s.texts]
    lengths = np.array([len(ids) for s in steps for ids in s.tokens], dtype=float)
    embedder = load_embedder("all-mpnet-base-v2")
    full = pp.embed_all(embedder, texts, "full candidates")
    bounds = pp.add_diversity(steps, full)
    ctx = contexts(steps, full, bounds, c.selection.ngram_n)
    hard = hard_filters(steps, full, bounds, ctx, c)
    context_terms = np.concatenate(
        [c.selection.lambda_div * s.diversity + c.selection.lambda_nov * s.novelty for s in steps]
    )
    return steps, texts, lengths, embedder, full, bounds, hard, context_terms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=20, help="of the 40 recorded")
    parser.add_argument("--keys", type=int, default=4)
    parser.add_argument("--reps", type=int, default=12, help="row permutations per step")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", default=str(pp.POOLS / "stop-replay.jsonl"))
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from samark.embed import new_key
    from samark.schemes.samark.cells import key_cells

    c = SAMarkConfig()
    t0 = time.perf_counter()
    steps, texts, lengths, embedder, full, bounds, hard, context_terms = prepared(args.prompts, c)
    print(
        f"{len(steps)} steps, {len(texts)} complete candidates; ready in "
        f"{time.perf_counter() - t0:.0f} s",
        flush=True,
    )

    all_designs = designs()
    names = [d.name for d in all_designs]
    weight = {n: np.zeros((args.keys, 2, len(texts))) for n in names}
    tokens = dict.fromkeys(names, 0.0)
    rows_drawn = dict.fromkeys(names, 0.0)
    quality: dict[str, np.ndarray] = {}
    rng = np.random.default_rng(args.seed)
    for key_no in range(args.keys):
        key = new_key(embedder)  # as `samark keygen` makes one; never printed
        frames = key_cells(key, embedder.dim, pp.CELLS, pp.CHANNELS)
        signed_key = frames.signed(full)[0]
        margin = frames.cell_margin(full)[0]
        stay_model = pp.stay_model(margin)
        for si, sign in enumerate((1.0, -1.0)):
            signed = sign * signed_key
            matched = np.all(signed > 0, axis=1) & hard
            terms = np.tanh(c.selection_kappa * signed)
            wm = pp.wm_score(signed)
            q = {
                "wm": wm,
                "docp_evidence": pp.docp_evidence(signed, stay_model),
                "stay_model": stay_model,
                "length": lengths,
            }
            for name, vals in q.items():
                quality.setdefault(name, np.zeros((args.keys, 2, len(texts))))[key_no, si] = vals
            score = {
                sd: wm * (1.0 if sd is None else ndtr(margin / sd)) + context_terms for sd in SDS
            }
            sat_levels = np.array(SATURATIONS)
            saturated = matched[:, None] & np.all(
                terms[:, :, None] >= sat_levels[None, None, :], axis=1
            )  # (n, levels)
            for i, s in enumerate(steps):
                a, b = bounds[i], bounds[i + 1]
                for _ in range(args.reps):
                    draw = Draw(rng.permutation(s.rows), a, b, lengths, matched, saturated)
                    laws: dict[tuple[int, float | None], tuple[np.ndarray, np.ndarray]] = {}
                    for d in all_designs:
                        drawn = d.n if d.chunk == 0 else draw.stop(d)
                        if (drawn, d.sd) not in laws:
                            kept = draw.complete_among(drawn)
                            w = pp.pick_law(kept - a, hard[a:b], matched[a:b], score[d.sd][a:b])
                            laws[(drawn, d.sd)] = (kept, np.zeros(0) if w is None else w)
                        kept, w = laws[(drawn, d.sd)]
                        tokens[d.name] += draw.cost(drawn) / args.reps
                        rows_drawn[d.name] += drawn / args.reps
                        if len(kept):
                            np.add.at(weight[d.name][key_no, si], kept, w / args.reps)
            elapsed = time.perf_counter() - t0
            print(f"key {key_no + 1}/{args.keys}, sign {sign:+.0f} ({elapsed:.0f} s)", flush=True)
    write(args, all_designs, weight, tokens, rows_drawn, quality, steps)
    print(f"done in {time.perf_counter() - t0:.0f} s", flush=True)


def write(
    args: argparse.Namespace,
    all_designs: list[Design],
    weight: dict[str, np.ndarray],
    tokens: dict[str, float],
    rows_drawn: dict[str, float],
    quality: dict[str, np.ndarray],
    steps: list[pp.Step],
) -> None:
    out = Path(args.output)
    step_of = np.concatenate([np.full(len(st.texts), i) for i, st in enumerate(steps)])
    prompt_of_step = np.array([st.prompt for st in steps])
    n_steps_total = len(steps) * args.keys * 2

    def per_prompt(name: str, d: str) -> np.ndarray:
        return pp.per_prompt_mean(weight[d], quality[name], step_of, prompt_of_step)

    rows: list[dict[str, Any]] = []
    for d in all_designs:
        w = weight[d.name].ravel()
        total = w.sum()

        def mean(name: str, w: np.ndarray = w, total: float = total) -> float:
            return float((quality[name].ravel() * w).sum() / total)

        rows.append(
            {
                "design": d.name,
                "chunk": d.chunk,
                "n": d.n,
                "saturation": d.saturation,
                "patience": d.patience,
                "cell_margin_sd": d.sd,
                "rows_per_step": rows_drawn[d.name] / n_steps_total,
                "tok_out": tokens[d.name] / (mean("length") * total),
                "wm": mean("wm"),
                "stay_model": mean("stay_model"),
                "docp_evidence": mean("docp_evidence"),
                "_per_prompt": per_prompt("docp_evidence", d.name),
            }
        )
    # the plain frontier (plain pick), interpolated in log Tok/Out, per prompt
    plain = sorted(
        (r for r in rows if r["chunk"] == 0 and r["cell_margin_sd"] is None),
        key=lambda r: r["tok_out"],
    )
    xs = np.log([r["tok_out"] for r in plain])
    ys = np.array([r["_per_prompt"] for r in plain])  # (designs, prompts)
    for r in rows:
        x = np.log(r["tok_out"])
        ref = np.array([np.interp(x, xs, ys[:, j]) for j in range(ys.shape[1])])
        diff = r["_per_prompt"] - ref
        r["docp_vs_frontier"] = float(diff.mean())
        r["docp_vs_frontier_se"] = float(diff.std(ddof=1) / np.sqrt(len(diff)))
        r["beyond_frontier"] = bool(x > xs[-1] or x < xs[0])
    meta = {
        "kind": "meta",
        "prompts": len({s.prompt for s in steps}),
        "steps": len(steps),
        "keys": args.keys,
        "reps": args.reps,
        "seed": args.seed,
    }
    with out.open("w") as f:
        f.write(json.dumps(meta) + "\n")
        for r in rows:
            f.write(
                json.dumps({"kind": "design", **{k: v for k, v in r.items() if k[0] != "_"}}) + "\n"
            )
    md = [
        f"Stopping a step once a candidate is saturated, replayed on {meta['steps']} recorded "
        f"steps ({meta['prompts']} prompts), {args.keys} fresh keys of 64 cells x 2 signs, "
        f"{args.reps} row permutations a step (shared by every design); cap {pp.ROWS} rows "
        "(the pools' size). Expected under the pick's law; Doc-P evidence is the model's "
        "(prefix_pruning). 'vs plain frontier': paired by prompt, the design's Doc-P evidence "
        "less plain N's (plain pick) interpolated at the design's own Tok/Out in log Tok/Out, "
        "mean and standard error over prompts (* outside the frontier's Tok/Out range).",
        "",
        "| design | rows a step | Tok/Out | S_wm | stay (model) | Doc-P evidence (model) "
        "| vs plain frontier |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        md.append(
            f"| {r['design']} | {r['rows_per_step']:.1f} | {r['tok_out']:.1f} | {r['wm']:.3f} | "
            f"{r['stay_model']:.3f} | {r['docp_evidence']:.3f} | "
            f"{r['docp_vs_frontier']:+.3f} ({r['docp_vs_frontier_se']:.3f})"
            f"{'*' if r['beyond_frontier'] else ''} |"
        )
    text = "\n".join(md) + "\n"
    out.with_suffix(".md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
