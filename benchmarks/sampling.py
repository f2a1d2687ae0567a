"""Candidate sampling, side by side on the same prompts in one run.

Part 1, one SAMark step (N candidates continuing a long context, default 400 tokens):
  naive      ``model.generate(prompt.repeat(N, 1), max_new_tokens=32)`` (the issue's baseline)
  expanded   our engine, prefix prefilled once, KV cache copied to the N rows
  shared     our engine, prefix prefilled once and shared by all rows (the default)
  floor      pure batched decoding of the same kept tokens from a 1-token prompt, rows
             leaving on the same schedule: the decode cost of those tokens on this machine
  context    the same decoding from the step's real context (prefilled, attended through
  floor      shared-prefix attention): the forward passes the step cannot avoid; shared
             over it is the engine's own overhead (sampling, sentence ends, bookkeeping)
Part 2, SAMark with the fixed N (the paper) vs. the adaptive budget: seconds per output
sentence, sampled tokens per output token (Tok/Out), and the output's detection z and p.

    python benchmarks/sampling.py                      # 3 prompts, N=64, 400-token context
    python benchmarks/sampling.py --prompts 2 --adaptive-prompts 4 --sentences 4
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import torch

from samark.datasets import load_dataset
from samark.embed import load_embedder, new_key
from samark.models import DEFAULT_GENERATOR
from samark.sampling.base import SamplingParams
from samark.sampling.transformers_engine import BatchDecoder, load_transformers_engine
from samark.schemes.samark import SAMark
from samark.schemes.samark.config import SAMarkConfig
from samark.segment import split_sentences


def long_contexts(lm, count: int, tokens: int) -> list[str]:
    """``count`` news contexts of exactly ``tokens`` tokens (articles joined when short)."""
    docs = [d.text for d in load_dataset("cnn_dailymail")]
    out, i = [], 0
    while len(out) < count:
        ids: list[int] = []
        while len(ids) < tokens:
            ids += lm.tokenizer(docs[i % len(docs)] + " ", add_special_tokens=False)["input_ids"]
            i += 1
        out.append(str(lm.tokenizer.decode(ids[:tokens])))
    return out


@torch.inference_mode()
def naive(lm, prefix: str, n: int, params: SamplingParams, new_tokens: int) -> float:
    ids = torch.tensor([lm.tokenizer(prefix)["input_ids"]])
    start = time.perf_counter()
    lm.model.generate(
        ids.repeat(n, 1),
        do_sample=True,
        temperature=params.temperature,
        top_p=params.top_p,
        top_k=0,
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        pad_token_id=0,
    )
    return time.perf_counter() - start


@torch.inference_mode()
def decode_floor(lm, lengths: list[int], prefix: list[int] | None = None) -> float:
    """Seconds to decode ``lengths[i]`` tokens in row i from a 1-token prompt, rows leaving
    as they finish (the engine's schedule), model forward passes only. With ``prefix``
    (token ids): from that context instead, prefilled and attended through shared-prefix
    attention as the engine does (the prefill is timed too): the engine's own floor, the
    forward passes a sentence step cannot avoid."""
    start = time.perf_counter()
    if prefix is None:
        bos = lm.tokenizer.bos_token_id or 1
        dec = BatchDecoder(lm.model, [bos], len(lengths), max(lengths) + 1, share_prefix=False)
        start = time.perf_counter()
    else:
        dec = BatchDecoder(lm.model, prefix, len(lengths), max(lengths) + 1, share_prefix=True)
    alive = list(range(len(lengths)))
    for step in range(max(lengths) - 1):
        keep = [b for b, row in enumerate(alive) if lengths[row] > step + 1]
        if not keep:
            break
        if len(keep) < len(alive):
            dec.keep(keep)
            alive = [alive[b] for b in keep]
        dec.step(torch.full((len(alive),), 13))
    return time.perf_counter() - start


def part_engine(args) -> None:
    lm = load_transformers_engine(args.generator)
    params = SamplingParams()
    rows = []
    for k, prefix in enumerate(long_contexts(lm, args.prompts, args.context)):
        lm.share_prefix = False
        expanded = lm.sample(prefix, args.candidates, params, seed=k)
        lm.share_prefix = True
        shared = lm.sample(prefix, args.candidates, params, seed=k)
        lengths = [max(c.n_tokens, 1) for c in shared.candidates]
        floor = decode_floor(lm, lengths)
        ids = lm.encode_prefix(prefix, params.max_sentence_tokens)
        context_floor = decode_floor(lm, lengths, ids)
        slow = (
            naive(lm, prefix, args.candidates, params, args.naive_tokens)
            if args.naive
            else float("nan")
        )
        rows.append(
            (slow, expanded.seconds, shared.seconds, floor, shared.tokens_sampled, context_floor)
        )
        print(
            f"  prompt {k}: naive {slow:.1f}s  expanded {expanded.seconds:.1f}s  "
            f"shared {shared.seconds:.1f}s  floor {floor:.1f}s  context floor "
            f"{context_floor:.1f}s  ({shared.tokens_sampled} tokens; shared / floor "
            f"{shared.seconds / floor:.2f}x, / context floor "
            f"{shared.seconds / context_floor:.2f}x)",
            flush=True,
        )
    mean = [statistics.fmean(r[i] for r in rows) for i in range(6)]
    print(
        f"\nPart 1: one step, N={args.candidates}, {args.context}-token context, "
        f"mean of {len(rows)} prompts"
    )
    print("  engine                 s/sentence   vs naive   vs floor   tok/s")
    for name, secs in (
        ("naive generate", mean[0]),
        ("engine, expanded KV", mean[1]),
        ("engine, shared prefix", mean[2]),
        ("decode floor", mean[3]),
        ("context floor", mean[5]),
    ):
        print(
            f"  {name:22s} {secs:10.1f} {mean[0] / secs:9.1f}x {secs / mean[3]:9.2f}x "
            f"{mean[4] / secs:7.0f}"
        )


def part_adaptive(args) -> None:
    embedder = load_embedder(args.embedder)
    key = new_key(embedder)
    docs = load_dataset("cnn_dailymail")[: args.adaptive_prompts]
    prompts = [" ".join(split_sentences(d.text)[:3]) for d in docs]
    print(
        f"\nPart 2: SAMark, {len(prompts)} prompts x {args.sentences} sentences, "
        f"N={args.candidates}"
    )
    print("  budget      s/sentence   Tok/Out   candidates/step   mean z   p<0.01")
    for label, cfg in (
        ("fixed N", SAMarkConfig.of(candidates=args.candidates)),
        ("adaptive", SAMarkConfig.of(candidates=args.candidates, adaptive=True)),
    ):
        scheme = SAMark(key, config=cfg, embedder=embedder, generator=args.generator)
        gens = [
            scheme.generate(p, max_new_sentences=args.sentences, seed=i)
            for i, p in enumerate(prompts)
        ]
        dets = [scheme.detect(g.text) for g in gens]
        n = sum(len(g.sentences) for g in gens)
        steps = [s["candidates"] for g in gens for s in g.steps]
        print(
            f"  {label:10s} {sum(g.seconds for g in gens) / n:10.1f} "
            f"{sum(g.tokens_sampled for g in gens) / sum(g.output_tokens for g in gens):9.1f} "
            f"{statistics.fmean(steps):17.1f} {statistics.fmean(d.z for d in dets):8.1f} "
            f"{sum(d.p_value < 0.01 for d in dets)}/{len(dets)}",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generator", default=DEFAULT_GENERATOR)
    ap.add_argument("--embedder", default="all-mpnet-base-v2")
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--context", type=int, default=400)
    ap.add_argument("--candidates", type=int, default=64)
    ap.add_argument("--naive-tokens", type=int, default=32)
    ap.add_argument("--no-naive", dest="naive", action="store_false")
    ap.add_argument("--adaptive-prompts", type=int, default=3)
    ap.add_argument("--sentences", type=int, default=4)
    ap.add_argument("--skip", choices=["engine", "adaptive"], default=None)
    args = ap.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads; generator {args.generator}"
    )
    if args.skip != "engine":
        part_engine(args)
    if args.skip != "adaptive" and args.adaptive_prompts > 0:
        part_adaptive(args)


if __name__ == "__main__":
    main()
