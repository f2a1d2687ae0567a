"""Distilled selection: teach the generator to write the sentences SAMark would pick, so that
fewer candidates (or one) carry the semantic mark (issue 63, design 2).

A LoRA adapter of SmolLM2-135M-Instruct (``peft``) is trained by direct preference
optimisation (DPO, Rafailov et al. 2023; written out here in a few lines: the loss is
-log sigmoid(beta ((pi_c - ref_c) - (pi_r - ref_r))) over a pair's log-likelihoods) on pairs
from the real candidate pools (``candidate_pools.py``: 40 CNN/DailyMail prompts x 6 steps
x 32 candidates): for one key (64 keyed cells, a fixed study key) and one generation sign
(+1), the candidate SAMark's pick favours most (the hard filters, softmax(eps S) over the
matched rows) against the one it favours least (the lowest S). The detector is unchanged.

The adapter is trained on the steps of the first ``--train-prompts`` prompts and measured
on the steps of the others (their contexts never seen), with and without it:

- the semantic layer's evidence per sentence, ``sum_j tanh(kappa s r_j cos_j)`` (kappa 30,
  s = +1), at N = 1 (one sampled sentence), 4 and 8 (SAMark's pick among N, expected under
  its law), and the share of sentences on the key's side on every pivot (matched);
- the same sentences under another key (its evidence must stay at chance: the adapter
  writes for its key only, and another key's false-positive rate must not move);
- quality: perplexity under Gemma 3 270M (the experiments' oracle) and 4-gram repetition;
- the training's time on this machine.

    OMP_NUM_THREADS=1 python -m benchmarks.studies.distilled_selection --minutes 25 \\
        --out experiments/runs/distilled-selection

Writes OUT/train.jsonl (loss as it trains), OUT/eval.jsonl (every sampled sentence and its
scores) and OUT/summary.md. Needs ``peft`` (pip install 'samark[research]').
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.studies import prefix_pruning as pp

KAPPA = 30.0
STUDY_KEY = b"distilled-selection-study-key-00"
OTHER_KEY = b"distilled-selection-other-key-00"
CONTEXT_TOKENS = 96  # the context a pair is trained on (its last tokens): CPU-sized


def frames_for(secret: bytes, embedder: Any) -> Any:
    from samark.keys import WatermarkKey
    from samark.keys.samark_material import PivotDraw
    from samark.schemes.samark.cells import key_cells

    draw = PivotDraw.avoiding(embedder.reference_directions(), 64, "projected")
    return key_cells(WatermarkKey(secret, embedder.identity, draw), embedder.dim, 64, 2)


def evidence(frames: Any, emb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(per sentence sum_j tanh(kappa r_j cos_j), all channels positive) under sign +1."""
    signed = frames.signed(emb)[0]
    return np.tanh(KAPPA * signed).sum(axis=1), np.all(signed > 0, axis=1)


def contexts_of(steps: list[pp.Step], prompts: dict[int, str]) -> list[str]:
    """Each step's context: its prompt, then the plain trajectory's earlier sentences."""
    out, last, text = [], -1, ""
    for s in steps:
        if s.prompt != last:
            last, text = s.prompt, prompts[s.prompt]
        out.append(text)
        text = text + s.texts[s.continued]
    return out


def load_prompts() -> dict[int, str]:
    out: dict[int, str] = {}
    for name in ("pools.jsonl", "pools-b.jsonl"):
        for line in (pp.POOLS / name).open():
            r = json.loads(line)
            out[r["prompt_index"]] = r["prompt"]
    return out


def pairs_for(steps: list[pp.Step], full: np.ndarray, frames: Any) -> list[tuple[int, int, int]]:
    """(step, favoured, least favoured) per step, under the key and sign +1: the pick's law
    over the step's candidates (hard filters, softmax(eps S) over matched), its mode
    against the lowest S."""
    from samark.schemes.samark.config import SAMarkConfig

    eps = SAMarkConfig().selection.epsilon
    out = []
    start = 0
    for i, s in enumerate(steps):
        emb = full[start : start + len(s.texts)]
        start += len(s.texts)
        score, matched = evidence(frames, emb)
        ok = matched & s.hard_ok[: len(s.texts)]
        if not ok.any():
            continue
        w = np.where(ok, np.exp(eps * (score - score[ok].max())), 0.0)
        best, worst = int(np.argmax(w)), int(np.argmin(score))
        if best != worst:
            out.append((i, best, worst))
    return out


def sequence_logp(model: Any, ctx: list[int], cont: list[int]) -> Any:
    import torch

    ids = torch.tensor([ctx + cont])
    logits = model(ids).logits[0, len(ctx) - 1 : -1]
    return torch.log_softmax(logits.float(), dim=-1).gather(1, ids[0, len(ctx) :, None]).sum()


def train(args: argparse.Namespace, out: Path) -> None:
    import torch
    from peft import LoraConfig, get_peft_model

    from samark.embed import load_embedder
    from samark.sampling.transformers_engine import TransformersEngine

    torch.manual_seed(0)
    steps = pp.load_steps(40)
    pp.tokenize(steps)
    embedder = load_embedder("all-mpnet-base-v2")
    full = pp.embed_all(embedder, [t for s in steps for t in s.texts], "full candidates")
    frames = frames_for(STUDY_KEY, embedder)
    prompts = load_prompts()
    ctxs = contexts_of(steps, prompts)
    train_ids = sorted(prompts)[: args.train_prompts]
    pairs = [p for p in pairs_for(steps, full, frames) if steps[p[0]].prompt in train_ids]
    rng = np.random.default_rng(0)
    rng.shuffle(pairs)
    lm = TransformersEngine("smollm2-135m-instruct", prefix_cache_bytes=0)
    tok = lm.tokenizer
    model = get_peft_model(
        lm.model,
        LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=["q_proj", "v_proj"]),
    )
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)
    start = time.monotonic()
    log = (out / "train.jsonl").open("w")
    done = 0
    for epoch in range(args.epochs):
        for i, best, worst in pairs:
            if time.monotonic() - start > 60 * args.minutes:
                break
            ctx = tok(ctxs[i], add_special_tokens=True)["input_ids"][-CONTEXT_TOKENS:]
            chosen, rejected = (steps[i].tokens[j] for j in (best, worst))
            with torch.no_grad(), model.disable_adapter():
                ref_c = sequence_logp(model, ctx, chosen)
                ref_r = sequence_logp(model, ctx, rejected)
            pol_c = sequence_logp(model, ctx, chosen)
            pol_r = sequence_logp(model, ctx, rejected)
            margin = args.beta * ((pol_c - ref_c) - (pol_r - ref_r))
            loss = -torch.nn.functional.logsigmoid(margin)
            opt.zero_grad()
            loss.backward()
            opt.step()
            done += 1
            log.write(
                json.dumps(
                    {
                        "pair": done,
                        "epoch": epoch,
                        "loss": float(loss),
                        "margin": float(margin),
                        "seconds": time.monotonic() - start,
                    }
                )
                + "\n"
            )
            log.flush()
            if done % 20 == 0:
                print(
                    f"{done} pairs, loss {float(loss):.3f}, {time.monotonic() - start:.0f} s",
                    flush=True,
                )
    model.save_pretrained(str(out / "adapter"))
    meta = {
        "pairs_trained": done,
        "pairs_available": len(pairs),
        "train_prompts": train_ids,
        "seconds": time.monotonic() - start,
        "lr": args.lr,
        "beta": args.beta,
        "lora": "r=8, alpha=16, q_proj+v_proj",
        "context_tokens": CONTEXT_TOKENS,
    }
    (out / "train-meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"trained on {done} pairs in {meta['seconds']:.0f} s", flush=True)


def evaluate(args: argparse.Namespace, out: Path) -> None:
    import torch
    from peft import PeftModel

    from samark.embed import load_embedder
    from samark.evaluation.perplexity import Perplexity
    from samark.sampling.base import SamplingParams
    from samark.sampling.transformers_engine import TransformersEngine
    from samark.text import ngrams, words

    steps = pp.load_steps(40)
    prompts = load_prompts()
    ctxs = contexts_of(steps, prompts)
    test = [i for i, s in enumerate(steps) if s.prompt in sorted(prompts)[args.train_prompts :]]
    test = test[: args.eval_steps]
    embedder = load_embedder("all-mpnet-base-v2")
    frames, other = frames_for(STUDY_KEY, embedder), frames_for(OTHER_KEY, embedder)
    oracle = Perplexity("gemma-3-270m")
    params = SamplingParams(temperature=0.7, top_p=0.95, max_sentence_tokens=64)
    base = TransformersEngine("smollm2-135m-instruct")
    tuned = TransformersEngine("smollm2-135m-instruct")
    tuned.model = PeftModel.from_pretrained(tuned.model, str(out / "adapter")).merge_and_unload()
    sink = (out / "eval.jsonl").open("w")
    for k, i in enumerate(test):
        for name, lm in (("base", base), ("adapter", tuned)):
            with torch.inference_mode():
                batch = lm.sample(ctxs[i], args.n, params, seed=1000 + i)
            texts = [c.text.strip() for c in batch.candidates if c.text and c.text.strip()]
            if not texts:
                continue
            emb = embedder.encode(texts)
            emb = emb / np.linalg.norm(emb, axis=1, keepdims=True)
            ev, matched = evidence(frames, emb)
            ev_other, _ = evidence(other, emb)
            for t, e, m, eo in zip(texts, ev, matched, ev_other, strict=True):
                grams = ngrams(words(t), 4)
                sink.write(
                    json.dumps(
                        {
                            "step": i,
                            "model": name,
                            "text": t,
                            "evidence": float(e),
                            "matched": bool(m),
                            "evidence_other_key": float(eo),
                            "perplexity": oracle.perplexity(ctxs[i], t),
                            "rep4": 1.0 - len(set(grams)) / max(len(grams), 1),
                        }
                    )
                    + "\n"
                )
            sink.flush()
        print(f"eval {k + 1}/{len(test)}", flush=True)
    summarise(out)


def summarise(out: Path) -> None:
    from math import comb

    rows = [json.loads(x) for x in (out / "eval.jsonl").open()]
    meta = json.loads((out / "train-meta.json").read_text())
    lines = [
        f"Distilled selection (DPO LoRA, {meta['lora']}, beta {meta['beta']}, lr {meta['lr']}): "
        f"{meta['pairs_trained']} pairs of {meta['pairs_available']} trained in "
        f"{meta['seconds'] / 60:.1f} min on this machine (1 torch thread, shared CPU); "
        f"{len({r['step'] for r in rows})} held-out steps. Evidence: sum_j tanh(kappa r_j cos_j) "
        "of a sentence under the study key, sign +1 (range -2 to 2); N = 4 / 8: SAMark's pick "
        "among the first N samples (best S; the softmax at eps 10 is nearly the max).",
        "",
        "| model | N = 1 evidence (se) | matched | N = 4 | N = 8 | another key's evidence (se) "
        "| perplexity (Gemma 270M, median) | 4-gram repetition |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in ("base", "adapter"):
        rs = [r for r in rows if r["model"] == name]
        ev = np.array([r["evidence"] for r in rs])
        oth = np.array([r["evidence_other_key"] for r in rs])
        best = {}
        for n in (4, 8):
            vals = []
            for step in {r["step"] for r in rs}:
                e = np.sort([r["evidence"] for r in rs if r["step"] == step])
                m = len(e)
                if m >= n:  # the expected best of n of the step's samples
                    w = np.array([comb(t, n - 1) for t in range(m)], dtype=float) / comb(m, n)
                    vals.append(float(w @ e))
            best[n] = float(np.mean(vals)) if vals else math.nan
        se = ev.std(ddof=1) / np.sqrt(len(ev))
        lines.append(
            f"| {name} | {ev.mean():+.3f} ({se:.3f}) | "
            f"{np.mean([r['matched'] for r in rs]):.2f} | {best[4]:+.3f} | {best[8]:+.3f} | "
            f"{oth.mean():+.3f} ({oth.std(ddof=1) / np.sqrt(len(oth)):.3f}) | "
            f"{np.median([r['perplexity'] for r in rs]):.1f} | "
            f"{np.mean([r['rep4'] for r in rs]):.3f} |"
        )
    text = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(text)
    print(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="experiments/runs/distilled-selection")
    ap.add_argument("--train-prompts", type=int, default=30)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--minutes", type=float, default=25.0, help="training stops after this")
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--beta", type=float, default=0.1)
    ap.add_argument("--n", type=int, default=8, help="samples per held-out step and model")
    ap.add_argument("--eval-steps", type=int, default=40)
    ap.add_argument("--stage", choices=["all", "train", "eval", "summary"], default="all")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.stage in ("all", "train"):
        train(args, out)
    if args.stage in ("all", "eval"):
        evaluate(args, out)
    if args.stage == "summary":
        summarise(out)


if __name__ == "__main__":
    main()
