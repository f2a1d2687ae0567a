"""Cost of SAMark generation and detection on the default models.

Prints seconds per sentence, sampled tokens per output token (Tok/Out), the shares of
candidate sampling and embedding in generation time, and detection seconds per sentence.

    python benchmarks/generation.py --prompts 3 --sentences 4 --candidates 64
    python benchmarks/generation.py --generator gemma-3-270m

Quality of the same outputs: SD, Distinct-2 and 4-gram repeats (the paper's definitions),
perplexity under an oracle LM (by default the other local generator), and the share
detected at p < 0.01. ``--out FILE.jsonl`` keeps the generated texts and per-text figures.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import torch

from samark.datasets import load_dataset
from samark.embed import load_embedder, new_key
from samark.evaluation.text_metrics import TEXT_METRICS
from samark.models import DEFAULT_GENERATOR
from samark.schemes.samark import SAMark
from samark.schemes.samark.config import SAMarkConfig
from samark.segment import split_sentences
from samark.text import ngrams, words

ORACLES = {"smollm2-135m-instruct": "gemma-3-270m", "gemma-3-270m": "smollm2-135m-instruct"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generator", default=DEFAULT_GENERATOR)
    ap.add_argument("--embedder", default="all-mpnet-base-v2")
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--sentences", type=int, default=4)
    ap.add_argument("--candidates", type=int, default=64)
    ap.add_argument("--show", action="store_true", help="print the generated texts")
    ap.add_argument("--oracle", help="LM preset for perplexity (default: the other generator)")
    ap.add_argument("--out", help="write one JSON record per generated text to this file")
    args = ap.parse_args()

    t0 = time.perf_counter()
    embedder = load_embedder(args.embedder)
    scheme = SAMark(
        new_key(embedder),
        config=SAMarkConfig.of(candidates=args.candidates),
        generator=args.generator,
    )
    _ = scheme.engine
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
    detections = [scheme.detect(g.text) for g in gens]
    det_s = time.perf_counter() - t1
    oracle_name = args.oracle or ORACLES.get(scheme.engine.name)
    ppl: list[float] = []
    if oracle_name:
        from samark.evaluation.perplexity import Perplexity

        oracle = Perplexity(oracle_name)
        ppl = [oracle.perplexity(g.prompt, g.text) for g in gens]
    if args.out:
        import json

        with open(args.out, "w", encoding="utf-8") as f:
            for i, (g, d) in enumerate(zip(gens, detections, strict=True)):
                rec = {
                    "generator": scheme.engine.name,
                    "prompt": g.prompt,
                    "text": g.text,
                    "sentences": len(g.sentences),
                    "seconds": g.seconds,
                    "p_value": d.p_value,
                    "perplexity": ppl[i] if ppl else None,
                    **{m: TEXT_METRICS.get(m)(g.text) for m in ("sd", "distinct2", "rep4")},
                }
                f.write(json.dumps(rec) + "\n")
    toks = [w for g in gens for w in words(g.text)]
    bigrams = ngrams(toks, 2)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads"
    )
    print(
        f"generator {scheme.engine.name}, embedder {embedder.name}, N={args.candidates}, "
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
    for m in ("sd", "distinct2", "rep4"):
        mean = sum(TEXT_METRICS.get(m)(g.text) for g in gens) / len(gens)
        print(f"  {m:<26} {mean:.3f} (mean per text)")
    if ppl:
        print(f"  perplexity under {oracle_name:<9} {sum(ppl) / len(ppl):.1f} (mean per text)")
    hits = sum(d.p_value < 0.01 for d in detections)
    print(f"  detected at p < 0.01       {hits} of {len(detections)}")


if __name__ == "__main__":
    main()
