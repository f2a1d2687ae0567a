"""Cost of SAMark generation and detection on the default models.

Prints seconds per sentence, sampled tokens per output token (Tok/Out), the shares of
candidate sampling and embedding in generation time, and detection seconds per sentence.

    python benchmarks/generation.py --prompts 3 --sentences 4 --candidates 64
    python benchmarks/generation.py --generator gemma-3-270m
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import torch

from samark.config import SAMarkConfig
from samark.datasets import load_dataset
from samark.embed import load_embedder, new_key
from samark.models import DEFAULT_GENERATOR
from samark.schemes.samark import SAMark
from samark.segment import split_sentences
from samark.text import ngrams, words


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generator", default=DEFAULT_GENERATOR)
    ap.add_argument("--embedder", default="all-mpnet-base-v2")
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--sentences", type=int, default=4)
    ap.add_argument("--candidates", type=int, default=64)
    ap.add_argument("--show", action="store_true", help="print the generated texts")
    args = ap.parse_args()

    t0 = time.perf_counter()
    embedder = load_embedder(args.embedder)
    scheme = SAMark(
        new_key(embedder), config=SAMarkConfig(candidates=args.candidates), generator=args.generator
    )
    _ = scheme.sampler
    load_s = time.perf_counter() - t0
    gens = []
    for i, doc in enumerate(load_dataset("cnn_dailymail")[: args.prompts]):
        prompt = " ".join(split_sentences(doc.text)[:3])
        gens.append(scheme.generate(prompt, max_new_sentences=args.sentences, seed=i))
        if args.show:
            print(f"--- {doc.id}\n{gens[-1].text}\n")
    n = sum(len(g.sentences) for g in gens)
    sampled = sum(g.tokens_sampled for g in gens)
    output = sum(g.output_tokens for g in gens)
    secs = sum(g.seconds for g in gens)
    t1 = time.perf_counter()
    for g in gens:
        scheme.detect(g.text)
    det_s = time.perf_counter() - t1
    toks = [w for g in gens for w in words(g.text)]
    bigrams = ngrams(toks, 2)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads"
    )
    print(
        f"generator {scheme.sampler.name}, embedder {embedder.name}, N={args.candidates}, "
        f"{len(gens)} prompts x {args.sentences} sentences (models loaded in {load_s:.1f}s)"
    )
    print(f"  seconds per sentence       {secs / n:.1f}")
    print(f"  Tok/Out                    {sampled / output:.1f}")
    print(f"  tokens sampled / sentence  {sampled / n:.0f}")
    print(f"  sampling share             {sum(g.sampling_seconds for g in gens) / secs:.0%}")
    print(f"  embedding share            {sum(g.embedding_seconds for g in gens) / secs:.0%}")
    print(f"  sampled tokens per second  {sampled / sum(g.sampling_seconds for g in gens):.0f}")
    print(f"  detection s per sentence   {det_s / n:.3f}")
    print(f"  fallbacks                  {sum(sum(g.fallbacks.values()) for g in gens)} of {n}")
    print(f"  Distinct-2 of outputs      {len(set(bigrams)) / max(1, len(bigrams)):.3f}")


if __name__ == "__main__":
    main()
