"""How exactly ``vllm-gumbel`` writes vLLM's Gumbel watermark on a CPU: every token written
at a fresh context compared with the token vLLM's own ``GumbelWatermarker`` picks from the
model's distribution there (logits recomputed by transformers, temperature 0.7, vLLM's
top-p 0.95, special tokens suppressed). Prints the count and the share that match.

    .venv-vllm/bin/python benchmarks/studies/vllm_gumbel_exactness.py --prompts 8 --sentences 8
"""

from __future__ import annotations

import argparse
import os

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--sentences", type=int, default=8)
    args = ap.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    torch.set_num_threads(1)
    from transformers import AutoModelForCausalLM
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p
    from vllm.v1.watermarking import GumbelWatermarker

    from samark.datasets import load_dataset, prompt_examples
    from samark.models import DEFAULT_GENERATOR, resolve_generator
    from samark.sampling.vllm_engine import TextRequest, close_vllm_engines, load_vllm_engine
    from samark.sampling.vllm_processors import GumbelRule

    engine = load_vllm_engine(DEFAULT_GENERATOR)
    examples = prompt_examples(
        load_dataset("cnn_dailymail"), prompt_sentences=3, sentences=12, count=args.prompts
    )
    special = tuple(sorted({int(i) for i in engine.tokenizer.all_special_ids}))
    rule = GumbelRule(123456789012345, 4)  # a benchmark's key, not a secret
    budget = 48 * args.sentences
    requests = [
        TextRequest(e.prompt, budget, args.sentences, seed=i, suppress=special, gumbel=rule)
        for i, e in enumerate(examples)
    ]
    written = engine.write_many(requests)
    model = AutoModelForCausalLM.from_pretrained(
        resolve_generator(DEFAULT_GENERATOR)[1], dtype=torch.float32
    )
    marker = GumbelWatermarker(rule.key, rule.context_width)
    width, fresh, same, repeated = rule.context_width, 0, 0, 0
    for request, text in zip(requests, written, strict=True):
        tokens, prompt = list(text.tokens), engine.encode(request.prompt, budget)
        with torch.inference_mode():
            logits = model(torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1 : -1]
        seen: set[tuple[int, ...]] = set()
        for t, token in enumerate(tokens):
            context = tuple(([-1] * width + tokens[:t])[-width:])
            if context in seen:  # vLLM samples a repeated context without the mark
                repeated += 1
                continue
            seen.add(context)
            row = logits[t].clone()
            row[list(special)] = float("-inf")
            processed = apply_top_k_top_p((row / 0.7).unsqueeze(0), None, torch.tensor([0.95]))
            fresh += 1
            same += int(marker.sample(processed, torch.tensor([context])).token_ids[0]) == token
    print(
        f"{len(requests)} texts of {args.sentences} sentences: {same} of {fresh} tokens at fresh "
        f"contexts are GumbelWatermarker's pick ({same / fresh:.2%}); {repeated} tokens at "
        "repeated contexts sampled without the mark"
    )
    close_vllm_engines()


if __name__ == "__main__":
    main()
