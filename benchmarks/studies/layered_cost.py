"""What the token layer costs inside the candidate engine: one SAMark step's N candidates
drawn with and without the green-list layer, interleaved on the same prefixes and seeds.

Prints seconds per candidate batch, tokens sampled, and seconds per sampled token for
both, and their ratio (the layer's overhead per sentence of generation, before embedding
and selection, which it does not touch).

    python benchmarks/studies/layered_cost.py --prompts 3 --repeats 3 --candidates 64
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from samark.datasets import load_dataset, prompt_examples
from samark.models import DEFAULT_GENERATOR
from samark.sampling.base import SamplingParams
from samark.sampling.transformers_engine import load_transformers_engine
from samark.token_layer import GreenListLayer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--candidates", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    lm = load_transformers_engine(DEFAULT_GENERATOR)
    vocab = int(lm.model.config.get_text_config().vocab_size)
    layer = GreenListLayer(b"layered-cost-benchmark-key-00000", vocab)
    params = SamplingParams()
    examples = prompt_examples(
        load_dataset("cnn_dailymail"), prompt_sentences=3, sentences=12, count=args.prompts
    )
    lm.sample(examples[0].prompt, 4, params, seed=0)  # warm up
    rows: dict[str, list[tuple[float, int]]] = {"plain": [], "layered": []}
    for e in examples:
        for r in range(args.repeats):
            for name, extra in (("plain", {}), ("layered", {"token_layer": layer})):
                t0 = time.perf_counter()
                batch = lm.sample(e.prompt, args.candidates, params, seed=r, **extra)  # type: ignore[arg-type]
                rows[name].append((time.perf_counter() - t0, batch.tokens_sampled))
    print(
        f"{args.prompts} prompts x {args.repeats} repeats, N = {args.candidates}, "
        f"{args.threads} torch thread(s), {lm.name}"
    )
    means = {}
    for name, values in rows.items():
        secs = np.array([v[0] for v in values])
        toks = np.array([v[1] for v in values])
        means[name] = (secs.mean(), toks.mean(), (secs / toks).mean() * 1e3)
        print(
            f"{name:8} {secs.mean():6.2f} s per batch, {toks.mean():7.0f} tokens, "
            f"{means[name][2]:.3f} ms per sampled token"
        )
    print(
        f"layered / plain: {means['layered'][0] / means['plain'][0]:.3f}x per batch, "
        f"{means['layered'][2] / means['plain'][2]:.3f}x per sampled token"
    )


if __name__ == "__main__":
    main()
