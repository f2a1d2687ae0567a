"""Candidates where evidence is short: a per-text budget that spends more candidates on the
sentences of a text whose evidence came out weak, fewer where it is already strong
(issue 63, design 3), replayed on the recorded candidate pools (no LLM generation).

Fixed N spends the same rows on every sentence. A text is detected on its total evidence,
so a row spent on a text that is already far past the threshold buys nothing, and one
spent on a text that lags buys the most, above all on short texts. Here each text is one
recorded trajectory (a prompt's 6 steps of 32 candidates: ``candidate_pools.py``) under
``--keys`` fresh keys of 64 keyed cells (``samark keygen``'s) x 2 signs and ``--reps``
random row orders; at every step each design picks as SAMark does (``pick_law``: the hard
filters, softmax(eps S) over the matched rows, ``select``'s fallback) among the first N
rows of the step's row order, one pick drawn from that law, and its sentence carries the
Doc-P model's evidence (``prefix_pruning.docp_evidence``: the chance it keeps its cell under
paraphrase times its expected tanh margin).

Designs: plain N (4 ... 32), and ``pace(lo, hi, r)``: a step draws ``lo`` rows when the
text's evidence so far is at least ``r`` per sentence, else ``hi`` (the first step: ``hi``).
Figures at 3 and 6 sentences (the first 3 or all 6 steps of a text):

- the mean evidence, its 10th percentile over texts (the texts a detector misses are the
  weak ones), and a modelled detection rate: the share of texts whose summed evidence
  passes the level-0.01 threshold of an unmarked text's (normal, with the per-sentence sd
  of a random candidate's evidence under a random sign: a model, not a detector);
- the difference from plain N = 32, paired by prompt (mean and standard error);
- Tok/Out: the rows' decoded tokens (a row that never ended a sentence: the cap) per token
  kept.

    OMP_NUM_THREADS=1 python -m benchmarks.studies.short_budget_replay

Writes experiments/runs/candidate-pools/short-budget-replay.{jsonl,md,png}.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.studies import prefix_pruning as pp
from benchmarks.studies.stop_replay import Draw, prepared
from samark.schemes.samark.config import SAMarkConfig

PLAIN = (4, 8, 16, 32)
PAIRS = ((4, 32), (8, 32), (16, 32), (4, 16), (8, 16))
PACES = (0.2, 0.3, 0.4, 0.5, 0.6)
Z01 = 2.3263  # the normal's upper 1% point


@dataclass(frozen=True)
class Design:
    lo: int
    hi: int
    pace: float  # 0: plain N = hi

    @property
    def name(self) -> str:
        return (
            f"plain N={self.hi}" if self.pace == 0 else f"pace({self.lo}, {self.hi}, {self.pace:g})"
        )

    def rows(self, t: int, so_far: float) -> int:
        if self.pace == 0 or t == 0:
            return self.hi
        return self.lo if so_far >= self.pace * t else self.hi


def designs() -> list[Design]:
    return [Design(n, n, 0.0) for n in PLAIN] + [
        Design(lo, hi, r) for lo, hi in PAIRS for r in PACES
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=40, help="of the 40 recorded")
    ap.add_argument("--keys", type=int, default=8)
    ap.add_argument("--reps", type=int, default=8, help="row orders per text, key and sign")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--output", default=str(pp.POOLS / "short-budget-replay.jsonl"))
    ap.add_argument("--replot", action="store_true", help="redraw the PNG from --output")
    args = ap.parse_args()
    if args.replot:
        out = Path(args.output)
        rows = [r for r in map(json.loads, out.open()) if r["kind"] == "design"]
        plot(rows, out.with_suffix(".png"))
        return

    import torch

    torch.set_num_threads(1)
    from samark.embed import new_key
    from samark.schemes.samark.cells import key_cells

    c = SAMarkConfig()
    t0 = time.perf_counter()
    steps, texts, lengths, embedder, full, bounds, hard, context_terms = prepared(args.prompts, c)
    by_prompt: dict[int, list[int]] = {}
    for i, s in enumerate(steps):
        by_prompt.setdefault(s.prompt, []).append(i)
    trajectories = [sorted(v, key=lambda i: steps[i].step) for v in by_prompt.values()]
    trajectories = [t for t in trajectories if len(t) >= 6]
    print(f"{len(trajectories)} texts of 6 steps; ready in {time.perf_counter() - t0:.0f} s")

    all_designs = designs()
    rng = np.random.default_rng(args.seed)
    # per design: (texts x keys x signs x reps, 6) evidence per sentence, tokens, kept tokens
    evidence: dict[str, list[list[float]]] = {d.name: [] for d in all_designs}
    spent = {d.name: [0.0, 0.0] for d in all_designs}
    prompt_of: list[int] = []
    null_sd: list[float] = []
    no_saturation = np.zeros((len(texts), 1), dtype=bool)  # Draw's stopping rule is unused
    for key_no in range(args.keys):
        key = new_key(embedder)  # as `samark keygen` makes one; never printed
        frames = key_cells(key, embedder.dim, pp.CELLS, pp.CHANNELS)
        signed_key = frames.signed(full)[0]
        stay = pp.stay_model(frames.cell_margin(full)[0])
        for sign in (1.0, -1.0):
            signed = sign * signed_key
            matched = np.all(signed > 0, axis=1) & hard
            score = pp.wm_score(signed) + context_terms
            ev = pp.docp_evidence(signed, stay)
            null_sd.append(float(ev.std()))
            for ti, traj in enumerate(trajectories):
                for _ in range(args.reps):
                    orders = [
                        Draw(
                            rng.permutation(steps[i].rows),
                            bounds[i],
                            bounds[i + 1],
                            lengths,
                            matched,
                            no_saturation,
                        )
                        for i in traj
                    ]
                    u = rng.random(len(traj))  # one uniform a step: the picks of all designs
                    prompt_of.append(ti)
                    for d in all_designs:
                        got, so_far = [], 0.0
                        for t, i in enumerate(traj):
                            a = bounds[i]
                            n = d.rows(t, so_far)
                            kept = orders[t].complete_among(n)
                            w = pp.pick_law(
                                kept - a,
                                hard[a : bounds[i + 1]],
                                matched[a : bounds[i + 1]],
                                score[a : bounds[i + 1]],
                            )
                            if w is None:
                                e, kept_len = 0.0, 0.0
                            else:
                                j = kept[
                                    min(
                                        int(np.searchsorted(np.cumsum(w), u[t] * w.sum())),
                                        len(w) - 1,
                                    )
                                ]
                                e, kept_len = float(ev[j]), float(lengths[j])
                            got.append(e)
                            so_far += e
                            spent[d.name][0] += orders[t].cost(n)
                            spent[d.name][1] += kept_len
                        evidence[d.name].append(got)
            print(
                f"key {key_no + 1}/{args.keys}, sign {sign:+.0f} "
                f"({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    sd0 = float(np.mean(null_sd))
    write(args, all_designs, evidence, spent, np.array(prompt_of), sd0, len(trajectories))


def write(
    args: argparse.Namespace,
    all_designs: list[Design],
    evidence: dict[str, list[list[float]]],
    spent: dict[str, list[float]],
    prompt_of: np.ndarray,
    sd0: float,
    texts: int,
) -> None:
    out = Path(args.output)
    ref = np.cumsum(np.array(evidence["plain N=32"]), axis=1)
    rows = []
    for d in all_designs:
        cum = np.cumsum(np.array(evidence[d.name]), axis=1)  # (samples, 6)
        row = {
            "design": d.name,
            "lo": d.lo,
            "hi": d.hi,
            "pace": d.pace,
            "tok_out": spent[d.name][0] / max(spent[d.name][1], 1.0),
        }
        curve = []
        for m in range(1, 7):
            x = cum[:, m - 1]
            curve.append(float(np.mean(x > Z01 * sd0 * np.sqrt(m))))
            if m in (3, 6):
                diff = x - ref[:, m - 1]
                per_prompt = np.array([diff[prompt_of == p].mean() for p in np.unique(prompt_of)])
                row.update(
                    {
                        f"mean_{m}": float(x.mean()),
                        f"p10_{m}": float(np.quantile(x, 0.1)),
                        f"detected_{m}": curve[-1],
                        f"vs_n32_{m}": float(per_prompt.mean()),
                        f"vs_n32_{m}_se": float(per_prompt.std(ddof=1) / np.sqrt(len(per_prompt))),
                    }
                )
        row["curve"] = curve
        rows.append(row)
    meta = {
        "kind": "meta",
        "texts": texts,
        "keys": args.keys,
        "reps": args.reps,
        "seed": args.seed,
        "null_sd_per_sentence": sd0,
    }
    with out.open("w") as f:
        f.write(json.dumps(meta) + "\n")
        for r in rows:
            f.write(json.dumps({"kind": "design", **r}) + "\n")
    md = [
        f"Candidates where evidence is short, replayed on {texts} recorded texts of 6 steps "
        f"(32 candidates a step), {args.keys} fresh keys of 64 cells x 2 signs, {args.reps} row "
        "orders each; one pick a step drawn from SAMark's law; Doc-P model evidence per "
        f"sentence (null sd {sd0:.3f}). 'detected': modelled share above the level-0.01 "
        "threshold of unmarked text (normal model). 'vs N=32': paired by text, mean (se).",
        "",
        "| design | Tok/Out | 3 sent.: mean | p10 | detected | vs N=32 | 6 sent.: mean | p10 "
        "| detected | vs N=32 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: r["tok_out"]):
        md.append(
            f"| {r['design']} | {r['tok_out']:.1f} | {r['mean_3']:.3f} | {r['p10_3']:.3f} | "
            f"{100 * r['detected_3']:.1f} | {r['vs_n32_3']:+.3f} ({r['vs_n32_3_se']:.3f}) | "
            f"{r['mean_6']:.3f} | {r['p10_6']:.3f} | {100 * r['detected_6']:.1f} | "
            f"{r['vs_n32_6']:+.3f} ({r['vs_n32_6_se']:.3f}) |"
        )
    text = "\n".join(md) + "\n"
    out.with_suffix(".md").write_text(text)
    print(text)
    plot(rows, out.with_suffix(".png"))


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    plain = [r for r in rows if r["pace"] == 0]
    paced = [r for r in rows if r["pace"] != 0]
    for m, ax in ((3, a), (6, b)):
        ax.plot(
            [r["tok_out"] for r in plain],
            [100 * r[f"detected_{m}"] for r in plain],
            "o-",
            color="black",
            label="plain N = 4, 8, 16, 32",
        )
        for lo, hi in PAIRS:
            rs = sorted(
                (r for r in paced if (r["lo"], r["hi"]) == (lo, hi)), key=lambda r: r["tok_out"]
            )
            ax.plot(
                [r["tok_out"] for r in rs],
                [100 * r[f"detected_{m}"] for r in rs],
                ".--",
                label=f"pace({lo}, {hi}, r)",
            )
        ax.set_xscale("log")
        ax.set_xticks([4, 8, 16, 32], ["4", "8", "16", "32"])
        ax.minorticks_off()
        ax.set_xlabel("Tok/Out (tokens decoded per token kept)")
        ax.set_ylabel(f"modelled detection at {m} sentences, %")
        ax.set_title(f"{m} sentences, Doc-P model")
        ax.grid(alpha=0.3)
    a.legend(fontsize=8, loc="lower right")
    fig.suptitle("Candidates where evidence is short vs fixed N (replay on recorded pools)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
