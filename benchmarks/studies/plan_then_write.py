"""Plan, then write: can a mark choose a sentence's meaning before paying for its words?
(issue 63, design 1; real generation with SmolLM2-135M-Instruct, no replay).

Every cheaper design so far picked among finished wordings. This one draws ``--sketches``
short sketches of the next sentence (the model's own answer to "in a few words, what will
the next sentence say?"), would pick one as SAMark picks a sentence (its embedding's
flag-signed cosines to its keyed cell's pivots), and then writes ONE sentence under it.
That is only worth anything if the written sentence lands where its sketch was: in the same
keyed cell, on the same side of that cell's pivots. This study measures exactly that,
before any design is built on it:

- for each of ``--prompts`` CNN/DailyMail prompts (the default run's) and ``--steps``
  contexts (the prompt, then the prompt and one plain sentence more), it draws
  ``--sketches`` sketches, writes ``--writes`` sentences under each sketch (the article
  and the sketch in the chat template: "write the next sentence; it should say: ..."),
  and draws ``--plain`` plain next sentences as the engine does (the article as a prefix);
- all are embedded (all-mpnet-base-v2) and scored under ``--keys`` fresh keys of 64
  keyed cells (``samark keygen``'s design), each text sign +1 and -1.

Figures, per context, key and sign, then averaged:

- **landing**: P(written sentence in its sketch's cell), P(same sign on every pivot | same
  cell); the chance floor is the same for two independent plain sentences of the context;
- **evidence per sentence**: SAMark's per-sentence score ``sum_j tanh(kappa s r_j cos_j)``
  (kappa 30) of the written sentence under the sketch the pick would choose (the best
  sketch's score), against plain sampling (one random plain sentence), SAMark's pick among
  N finished plain sentences (best of N, N = 2 ... ``--plain``), and the write under a
  random sketch (the design's own floor);
- **cost**: tokens decoded for the sketches and the one written sentence, per token kept
  (the prompt's prefill is extra: two prompts a step instead of one).

    OMP_NUM_THREADS=1 python -m benchmarks.studies.plan_then_write --prompts 20 \\
        --out experiments/runs/plan-then-write/pairs.jsonl
    python -m benchmarks.studies.plan_then_write \\
        --table experiments/runs/plan-then-write/pairs.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

SKETCH_ASK = (
    "Here is the start of a news article:\n\n{context}\n\n"
    "What is the next sentence of the article about? Answer in a few words."
)
#: the sketch's answer begins here (the model writes the words after it): without it, the
#: 135M model answers "The next sentence will be ..." more often than not
SKETCH_LEAD = "The next sentence is about"
WRITE_ASK = (
    "Here is the start of a news article:\n\n{context}\n\n"
    "Write the next sentence of the article. It is about {sketch}."
)


def chat(tokenizer: Any, user: str) -> str:
    return str(
        tokenizer.apply_chat_template(
            [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True
        )
    )


def sketches(engine: Any, context: str, n: int, seed: int) -> tuple[list[str], int]:
    """``n`` sketches (their first line, up to 16 tokens) and the tokens decoded."""
    from samark.sampling.base import SamplingParams

    tokens = engine.sample_tokens(
        chat(engine.tokenizer, SKETCH_ASK.format(context=context)) + SKETCH_LEAD,
        n,
        SamplingParams(temperature=0.7, top_p=0.95),
        16,
        seed=seed,
    )
    out, decoded = [], 0
    for row in tokens.tolist():
        cut = next((i for i, t in enumerate(row) if t in engine.eos_ids), len(row))
        decoded += min(cut + 1, len(row))
        text = engine.decode(row[:cut]).split("\n")[0].split(".")[0].strip()
        out.append(text)
    return out, decoded


def run(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(1)
    from samark.datasets import load_dataset, prompt_examples
    from samark.embed import load_embedder
    from samark.models import DEFAULT_GENERATOR
    from samark.sampling.base import SamplingParams
    from samark.sampling.transformers_engine import load_transformers_engine

    engine = load_transformers_engine(DEFAULT_GENERATOR)
    embedder = load_embedder("all-mpnet-base-v2")
    params = SamplingParams(temperature=0.7, top_p=0.95, max_sentence_tokens=64)
    examples = prompt_examples(
        load_dataset("cnn_dailymail"), prompt_sentences=3, sentences=12, count=args.prompts
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        done = {(r["prompt_index"], r["step"]) for r in map(json.loads, out.open())}
    start = time.monotonic()
    for i, ex in enumerate(examples):
        context = ex.prompt
        for step in range(args.steps):
            seed = 1000 * i + 10 * step
            plain = engine.sample(context, args.plain, params, seed=seed + 1)
            plain_texts = [c.text for c in plain.candidates]
            if (i, step) in done:
                context = context + (next((t for t in plain_texts if t), "") or "")
                continue
            sk, sketch_tokens = sketches(engine, context, args.sketches, seed + 2)
            writes: list[list[str | None]] = []
            write_tokens: list[list[int]] = []
            for j, s in enumerate(sk):
                batch = engine.sample(
                    chat(engine.tokenizer, WRITE_ASK.format(context=context, sketch=s)),
                    args.writes,
                    params,
                    seed=seed + 100 + j,
                )
                writes.append([c.text.strip() if c.text else None for c in batch.candidates])
                write_tokens.append([c.n_tokens for c in batch.candidates])
            texts = sk + [w for ws in writes for w in ws if w] + [t for t in plain_texts if t]
            emb = embedder.encode([t for t in texts])
            record = {
                "prompt_index": i,
                "item": ex.id,
                "step": step,
                "sketches": sk,
                "sketch_tokens": sketch_tokens,
                "writes": writes,
                "write_tokens": write_tokens,
                "plain": plain_texts,
                "plain_tokens": [c.n_tokens for c in plain.candidates],
                "embeddings": np.round(emb, 6).tolist(),
            }
            with out.open("a") as f:
                f.write(json.dumps(record) + "\n")
            print(
                f"prompt {i + 1}/{len(examples)} step {step}: {len(sk)} sketches, "
                f"e.g. {sk[0]!r}; {time.monotonic() - start:.0f} s",
                flush=True,
            )
            context = context + (next((t for t in plain_texts if t), "") or "")


def _score(signed: np.ndarray, sign: float, kappa: float = 30.0) -> np.ndarray:
    """SAMark's per-sentence evidence, sum_j tanh(kappa s r_j cos_j): (..., c) -> (...)."""
    return np.tanh(kappa * sign * signed).sum(axis=-1)


def record_embeddings(r: dict[str, Any], embedder: Any) -> np.ndarray:
    """A record's embeddings in its order (sketches, the writes that completed, the plain
    sentences that completed): stored, or embedded again (committed records drop them)."""
    if "embeddings" in r:
        return np.asarray(r["embeddings"], dtype=np.float32)
    texts = r["sketches"] + [w for ws in r["writes"] for w in ws if w]
    texts += [t for t in r["plain"] if t]
    return np.asarray(embedder.encode(texts), dtype=np.float32)


def table(path: str, keys: int, n_cells: int = 64) -> None:
    from samark.embed import load_embedder
    from samark.keys import WatermarkKey
    from samark.keys.samark_material import PivotDraw
    from samark.schemes.samark.cells import CellFrames, key_cells

    embedder = load_embedder("all-mpnet-base-v2")
    draw = PivotDraw.avoiding(embedder.reference_directions(), 64, "projected")
    frames = CellFrames.stack(
        [
            key_cells(
                WatermarkKey(
                    f"plan-then-write-key-{i:03d}".ljust(32).encode(), embedder.identity, draw
                ),
                768,
                n_cells,
                2,
            )
            for i in range(keys)
        ]
    )
    with open(path) as f:
        records = [json.loads(line) for line in f]
    land_cell, land_sign, floor_cell, floor_sign = [], [], [], []
    twin_cell, twin_sign = [], []  # two writes under one sketch
    design, random_sketch, plain_one = [], [], []
    best_of: dict[int, list[float]] = {}
    cost_design, cost_plain = [], []
    for r in records:
        sk = r["sketches"]
        emb = record_embeddings(r, embedder)
        n_sk = len(sk)
        write_idx: list[list[int]] = []
        k = n_sk
        for ws in r["writes"]:
            row = []
            for w in ws:
                if w:
                    row.append(k)
                    k += 1
            write_idx.append(row)
        plain_idx = list(range(k, len(emb)))
        if not plain_idx or not any(write_idx):
            continue
        cells = frames.cell_of(emb)  # (K, n)
        signed = frames.signed(emb)  # (K, n, c)
        kept_tokens = np.mean([t for ts in r["write_tokens"] for t in ts]) or 1
        cost_design.append((r["sketch_tokens"] + kept_tokens) / kept_tokens)
        cost_plain.append(np.mean(r["plain_tokens"]) / np.mean(r["plain_tokens"]))
        for key in range(frames.count):
            for j, ws in enumerate(write_idx):
                for w in ws:
                    same = cells[key, j] == cells[key, w]
                    land_cell.append(same)
                    if same:
                        land_sign.append(
                            bool(np.all(np.sign(signed[key, j]) == np.sign(signed[key, w])))
                        )
            for ws in write_idx:
                for a in range(len(ws)):
                    for b in range(a + 1, len(ws)):
                        same = cells[key, ws[a]] == cells[key, ws[b]]
                        twin_cell.append(same)
                        if same:
                            twin_sign.append(
                                bool(
                                    np.all(
                                        np.sign(signed[key, ws[a]]) == np.sign(signed[key, ws[b]])
                                    )
                                )
                            )
            for a in range(len(plain_idx)):
                for b in range(a + 1, len(plain_idx)):
                    pa, pb = plain_idx[a], plain_idx[b]
                    same = cells[key, pa] == cells[key, pb]
                    floor_cell.append(same)
                    if same:
                        floor_sign.append(
                            bool(np.all(np.sign(signed[key, pa]) == np.sign(signed[key, pb])))
                        )
            for sign in (1.0, -1.0):
                sk_scores = _score(signed[key, :n_sk], sign)
                has = [j for j in range(n_sk) if write_idx[j]]
                best = max(has, key=lambda j: sk_scores[j])
                design.append(float(np.mean(_score(signed[key, write_idx[best]], sign))))
                random_sketch.append(
                    float(np.mean([np.mean(_score(signed[key, write_idx[j]], sign)) for j in has]))
                )
                ps = _score(signed[key, plain_idx], sign)
                plain_one.append(float(ps.mean()))
                for n in range(2, len(plain_idx) + 1):
                    # the expected best of n among the plain sentences (order statistics)
                    srt = np.sort(ps)
                    m = len(srt)
                    from math import comb

                    w = np.array([comb(t, n - 1) for t in range(m)], dtype=float) / comb(m, n)
                    best_of.setdefault(n, []).append(float(w @ srt))
    print(f"{len(records)} contexts, {keys} keys of {n_cells} cells x 2 signs\n")
    print("| what | value |\n|---|---|")
    print(f"| written sentence in its sketch's cell | {np.mean(land_cell):.3f} |")
    print(f"| ... and on the same side of every pivot, given the cell | {np.mean(land_sign):.3f} |")
    print(f"| two writes under one sketch, same cell | {np.mean(twin_cell):.3f} |")
    print(f"| ... same side given the cell | {np.mean(twin_sign):.3f} |")
    print(f"| chance: two plain sentences, same cell | {np.mean(floor_cell):.3f} |")
    print(f"| chance: same side given the cell | {np.mean(floor_sign):.3f} |")
    print("\n| design | evidence per sentence (mean, se) | Tok/Out (decoding) |\n|---|---|---|")

    def line(name: str, xs: list[float], cost: str) -> None:
        x = np.asarray(xs)
        print(f"| {name} | {x.mean():+.3f} ({x.std(ddof=1) / np.sqrt(len(x)):.3f}) | {cost} |")

    line("plain sampling (one sentence)", plain_one, "1.0")
    line("write under a random sketch", random_sketch, f"{np.mean(cost_design):.1f}")
    line("plan, then write (best sketch)", design, f"{np.mean(cost_design):.1f}")
    for n, xs in sorted(best_of.items()):
        line(f"SAMark's pick among {n} finished sentences", xs, f"about {n}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=20)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--sketches", type=int, default=8)
    ap.add_argument("--writes", type=int, default=2)
    ap.add_argument("--plain", type=int, default=8)
    ap.add_argument("--keys", type=int, default=8)
    ap.add_argument(
        "--cells", type=int, default=64, help="the keys' cells (1: one set of static pivots)"
    )
    ap.add_argument("--out", default="experiments/runs/plan-then-write/pairs.jsonl")
    ap.add_argument("--table", help="print the table of a records file and stop")
    args = ap.parse_args()
    if args.table:
        table(args.table, args.keys, args.cells)
    else:
        run(args)


if __name__ == "__main__":
    main()
