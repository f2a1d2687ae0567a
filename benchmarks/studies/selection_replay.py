"""Mark designs replayed on recorded candidate pools (issue 44): static pivots (SAMark) and
pivots keyed by each sentence's own semantic cell, unattacked and attacked.

Each pool of ``candidate_pools.py`` is key-independent, so a design under a fresh key is
replayed offline: at step t its rule picks among pool t (its own history feeds the hard
filters and the diversity terms). Its text is then scored, unattacked and after each
``--attacks`` (the project's Doc-P (local), Doc-T and Mix 50% with the prompt's own human
continuation), by the design's statistic with an exact p-value: the rank of the key's value
among ``--nulls`` null keys drawn from the same law (the key is one draw of that law, so
under H0 -- a text that does not depend on the key -- the rank is uniform). Human texts
(each prompt's own continuation) give the FPR.

A design (``Design``): ``cells`` 0 is SAMark's static pivots (``channels`` random flags a
generation, majority-voted per channel); M >= 2 is the shipped keyed cells
(samark.schemes.samark.cells: M keyed anchors, each cell its own pivots and flags, one
random sign a generation). Every design picks with SAMark's own selection (select()).

Why cells: with static pivots the mark is one offset along the key shared by every
sentence, and so is the text's topic: a random direction's projection of the text's mean
has spread |mean embedding| / sqrt(dim), which does not shrink with more sentences when
they say similar things. Pivots that change from sentence to sentence make the sentences'
null projections independent, so evidence adds up as sqrt(n). The price: a paraphrase that
moves a sentence to another cell loses that sentence's evidence.

    python -m benchmarks.studies.selection_replay experiments/runs/candidate-pools/pools.jsonl \\
        --keys 5 --lengths 3 6 --attacks none human doc-p doc-t mix \\
        --out experiments/runs/candidate-pools/replay.jsonl

Screening only: the replayed pick's context is the plain trajectory's (candidate_pools.py).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from samark.keys.pivots import PivotLaw
from samark.schemes.samark.cells import CellFrames, cell_evidence, null_cells
from samark.schemes.samark.config import SAMarkConfig
from samark.schemes.samark.detector import embed_sentences
from samark.schemes.samark.selection import select
from samark.schemes.samark.statistics import (
    alignment,
    channel_responses,
    exchangeable_p_value,
    statistic_values,
)
from samark.text import ngrams, words

DIM = 768
#: the selection and detection parameters every design replays with (the paper's)
PAPER = SAMarkConfig()
KAPPA = PAPER.detection.kappa
#: the replay's keys and null sets: Haar pivots (no avoided directions)
LAW = PivotLaw.of("avoid", None)


@dataclass(frozen=True)
class Design:
    """``cells`` 0: SAMark's static pivots with ``channels`` random flags a generation,
    majority-voted per channel; M >= 2: keyed cells (samark.schemes.samark.cells)."""

    name: str
    cells: int = 0
    channels: int = 2
    statistic: str = "scan"


def frames_of(design: Design, count: int, seed: int) -> CellFrames:
    """``count`` keys of the design's law (static pivots are the one-cell case)."""
    return null_cells(LAW, count, DIM, max(design.cells, 1), design.channels, seed)


def p_value(frames: CellFrames, emb: np.ndarray, design: Design) -> float:
    """The exact p-value of a text under the key (frame 0) among the null frames."""
    if design.cells:
        evidence = cell_evidence(frames.signed(emb), KAPPA)
    else:
        evidence = alignment(channel_responses(emb, frames.pivots[:, 0]), KAPPA)
    values = statistic_values(evidence, design.statistic)  # type: ignore[arg-type]
    return exchangeable_p_value(float(values[0]), values[1:])


def replay(
    steps: list[dict[str, Any]],
    key: CellFrames,
    design: Design,
    rng: np.random.Generator,
    sentences: int,
    candidates: int,
) -> tuple[list[str], np.ndarray, int]:
    """The design's text over the first ``sentences`` pools, picked by SAMark's own
    selection (the paper's filters, score and softmax): (sentences, embeddings, matched)."""
    flags = rng.choice([-1.0, 1.0], size=1 if design.cells else design.channels)
    context = words(steps[0]["prompt"])
    context_ngrams = set(ngrams(context, 4))
    vocabulary = set(context)
    history = np.zeros((0, DIM))
    chosen: list[str] = []
    matched = 0
    for s in steps[:sentences]:
        texts = s["candidates"][:candidates]
        emb = s["embeddings"][:candidates].astype(np.float64)
        choice = select(
            texts,
            emb,
            key.pivots[0, 0].astype(np.float64),
            flags,
            context_ngrams,
            vocabulary,
            history,
            kappa=PAPER.selection_kappa,
            epsilon=PAPER.selection.epsilon,
            lambda_div=PAPER.selection.lambda_div,
            lambda_nov=PAPER.selection.lambda_nov,
            theta_sem=PAPER.selection.theta_sem,
            theta_ngram=PAPER.selection.theta_ngram,
            ngram_n=PAPER.selection.ngram_n,
            signed=key.signed(emb)[0] * flags[0] if design.cells else None,
            rng=rng,
        )
        matched += choice.kind == "matched"
        chosen.append(texts[choice.index])
        history = np.vstack([history, emb[choice.index]])
        new = words(texts[choice.index])
        context.extend(new)
        context_ngrams.update(ngrams(context[-(len(new) + 3) :], 4))
        vocabulary.update(new)
    return chosen, history, matched


DESIGNS = {
    d.name: d
    for d in (
        Design("static (SAMark)"),
        Design("static c3", channels=3),
        Design("cells 4", cells=4),
        Design("cells 16", cells=16),
        Design("cells 64", cells=64),
        Design("cells 16 c1", cells=16, channels=1),
        Design("cells 16 c3", cells=16, channels=3),
        Design("cells 32 c1", cells=32, channels=1),
        Design("cells 64 c1", cells=64, channels=1),
        Design("cells 256", cells=256),
        Design("cells 256 c1", cells=256, channels=1),
    )
}


class Attacks:
    """The attacks of the paper protocol that run locally in seconds: Doc-P (local),
    Doc-T (Portuguese round trip, sentence-wise), Mix 50% with the prompt's own human text."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self._docp: Any = None
        self._trip: Any = None

    def __call__(self, name: str, text: str, human: str, seed: int) -> str:
        if name == "doc-p":
            if self._docp is None:
                from samark.evaluation.attacks.local_paraphrase import LocalParaphrase

                self._docp = LocalParaphrase()
            return str(self._docp.apply_one(text, random.Random(seed), None))
        if name == "doc-t":
            if self._trip is None:
                from samark.evaluation.attacks.translation import PortugueseRoundTrip

                self._trip = PortugueseRoundTrip()
            return str(self._trip.text(text))
        if name == "mix":
            from samark.evaluation.attacks.human_mix import HumanMix

            return str(HumanMix(0.5).apply_one(text, random.Random(seed), human))
        raise ValueError(name)

    def embed(self, text: str) -> np.ndarray:
        """The text's unit sentence embeddings, as the detector embeds them."""
        return embed_sentences(self.embedder, [text])[0][1]


def main() -> None:
    from benchmarks.studies.candidate_pools import load_pools

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records")
    parser.add_argument("--keys", type=int, default=5)
    parser.add_argument("--nulls", type=int, default=999)
    parser.add_argument("--lengths", type=int, nargs="+", default=[3, 6])
    parser.add_argument("--designs", nargs="+", default=list(DESIGNS))
    parser.add_argument("--candidates", type=int, default=32)
    parser.add_argument("--attacks", nargs="+", default=["none", "human"])
    parser.add_argument("--prompts", type=int, default=0, help="first P prompts (0: all)")
    parser.add_argument(
        "--prompt-ids", default="", help="only these prompt indices, e.g. 0-12,22-30"
    )
    parser.add_argument("--out")
    parser.add_argument(
        "--plot", nargs="+", help="draw these replay records into --out (a PNG) and stop"
    )
    args = parser.parse_args()
    if args.plot:
        plot([Path(p) for p in args.plot], Path(args.out))
        return
    prompts = load_pools(Path(args.records))
    if args.prompts:
        prompts = prompts[: args.prompts]
    if args.prompt_ids:
        wanted = {
            i
            for part in args.prompt_ids.split(",")
            for i in range(int(part.split("-")[0]), int(part.split("-")[-1]) + 1)
        }
        prompts = [steps for steps in prompts if steps[0]["prompt_index"] in wanted]
    attacker: Attacks | None = None
    if set(args.attacks) - {"none"}:
        from samark.embed import load_embedder

        attacker = Attacks(load_embedder("all-mpnet-base-v2"))
    out = Path(args.out) if args.out else None
    human_emb: dict[int, np.ndarray] = {}
    for name in args.designs:
        design = DESIGNS[name]
        start = time.perf_counter()
        keys = frames_of(design, args.keys, seed=7)
        nulls = frames_of(design, args.nulls, seed=8)
        rows = []
        for k in range(args.keys):
            key = keys[k : k + 1]
            scored = key.join(nulls)
            for p, steps in enumerate(prompts):
                rng = np.random.default_rng([k, p, 44])
                n_max = min(max(args.lengths), len(steps))
                sents, emb, matched = replay(steps, key, design, rng, n_max, args.candidates)
                human = steps[0]["human"]
                for attack in args.attacks:
                    if attack == "none":
                        texts_emb = {n: emb[:n] for n in args.lengths if n <= n_max}
                    elif attack == "human":
                        if p not in human_emb:
                            assert attacker is not None
                            human_emb[p] = attacker.embed(human)
                        texts_emb = {n: human_emb[p][:n] for n in args.lengths}
                    else:
                        assert attacker is not None
                        texts_emb = {}
                        for n in args.lengths:
                            if n > n_max:
                                continue
                            text = " ".join(sents[:n])
                            attacked = attacker(attack, text, human, seed=k * 1000 + p)
                            texts_emb[n] = attacker.embed(attacked)
                    for n, e in texts_emb.items():
                        rows.append(
                            {
                                "design": name,
                                "key": k,
                                "prompt": steps[0]["prompt_index"],
                                "n": n,
                                "attack": attack,
                                "matched": matched if attack == "none" else None,
                                "p": p_value(scored, e, design),
                            }
                        )
        summarise(rows)
        print(f"  ({time.perf_counter() - start:.0f} s)", flush=True)
        if out:
            with out.open("a") as f:
                for r in rows:
                    f.write(json.dumps(r) + "\n")


def summarise(rows: list[dict[str, Any]]) -> None:
    for (design, attack, n), group in _groups(rows).items():
        ps = np.array([r["p"] for r in group])
        print(
            f"{design:24s} {attack:6s} n={n:2d} texts={len(ps):4d} "
            f"p<.01 {np.mean(ps < 0.01):.2f}  p<.05 {np.mean(ps < 0.05):.2f}  "
            f"median p {np.median(ps):.3f}",
            flush=True,
        )


def _groups(rows: list[dict[str, Any]]) -> dict[tuple[str, str, int], list[dict[str, Any]]]:
    out: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault((r["design"], r["attack"], r["n"]), []).append(r)
    return out


def plot(records: list[Path], out: Path, n: int = 6) -> None:
    """Share with p < 0.01 per design and attack at ``n`` sentences, as grouped bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for path in records for line in path.open()]
    attacks = [
        ("none", "no attack"),
        ("doc-p", "Doc-P (local)"),
        ("doc-t", "Doc-T"),
        ("mix", "Mix 50%"),
    ]
    designs = [
        ("static (SAMark)", "black", "static pivots (SAMark)"),
        ("cells 16", "tab:blue", "16 cells"),
        ("cells 64", "tab:green", "64 cells"),
    ]
    fig, ax = plt.subplots(figsize=(7.5, 4.2), dpi=130)
    width = 0.26
    for i, (design, colour, label) in enumerate(designs):
        values = []
        for attack, _ in attacks:
            ps = [
                r["p"]
                for r in rows
                if r["design"] == design and r["attack"] == attack and r["n"] == n
            ]
            values.append(100 * float(np.mean(np.array(ps) < 0.01)) if ps else float("nan"))
        xs = np.arange(len(attacks)) + (i - 1) * width
        bars = ax.bar(xs, values, width, color=colour, label=label)
        ax.bar_label(bars, fmt="%.0f", fontsize=7, padding=1)
    ax.set_xticks(np.arange(len(attacks)), [a for _, a in attacks])
    ax.set_ylabel("texts detected, semantic layer alone (%)")
    ax.set_ylim(0, 105)
    ax.set_title(f"Replayed real pools, {n} sentences, N = 32: p < 0.01")
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)


if __name__ == "__main__":
    main()
