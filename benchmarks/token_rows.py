"""Token rows written in the candidate engine against transformers' ``generate``.

Since 2026-11-26 the token-level rows (KGW, SynthID, Unigram, ...) write in SAMark's
candidate engine. This times both ways on the same prompts and settings: the engine
(``scheme.generate_batch``: shared-prefix decoding, one random stream per prompt, stops
once the asked sentences are complete) and the former path, one left-padded
``model.generate`` batch to the full token budget (12 sentences x 48 tokens), with the
same processors. Prints seconds per text, tokens drawn per output token, sentences per
text and the share detected at p < 0.01 for each.

    python benchmarks/token_rows.py --schemes kgw,unwatermarked --prompts 10 --sentences 12

Take timings on a quiet machine (one torch thread by default).
"""

from __future__ import annotations

import argparse
import platform
import time
from typing import Any

import numpy as np
import torch
from transformers import GenerationConfig

from samark.datasets import load_dataset
from samark.keys import EmbedderIdentity, WatermarkKey
from samark.sampling.transformers_engine import left_pad
from samark.schemes import create_scheme
from samark.schemes.lm_generate import LMGenerateScheme, special_ids
from samark.segment import split_sentences, whole_sentences


def generate_reference(
    scheme: LMGenerateScheme, prompts: list[str], sentences: int, seed: int
) -> list[tuple[str, int]]:
    """(text, tokens drawn) per prompt through one left-padded ``model.generate`` batch."""
    lm, c = scheme.lm, scheme.config
    budget = sentences * c.tokens_per_sentence
    ids, mask = left_pad([lm.encode_prefix(p, budget) for p in prompts], lm.pad_id)
    width = ids.shape[1]
    config = GenerationConfig(
        do_sample=True,
        temperature=c.temperature,
        top_p=c.top_p,
        top_k=0,
        max_new_tokens=budget,
        pad_token_id=lm.pad_id,
        eos_token_id=sorted(lm.eos_ids) or None,
        suppress_tokens=sorted(special_ids(lm)),
        watermarking_config=scheme.watermarking_config(),
    )
    torch.manual_seed(seed)
    model: Any = lm.model
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
    texts = []
    for row in out[:, width:].tolist():
        new = [t for t in row if t not in lm.eos_ids and t != lm.pad_id]
        texts.append((" ".join(whole_sentences(lm.decode(new), sentences)), len(row)))
    return texts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schemes", default="kgw,unwatermarked")
    ap.add_argument("--prompts", type=int, default=10)
    ap.add_argument("--sentences", type=int, default=12)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    docs = load_dataset("cnn_dailymail")[: args.prompts]
    prompts = [" ".join(split_sentences(d.text)[:3]) for d in docs]
    key = WatermarkKey(b"benchmark-token-rows-key-0000000", EmbedderIdentity("none", "none"))
    print(
        f"# {platform.machine()}, {torch.get_num_threads()} torch thread(s), torch "
        f"{torch.__version__}; {args.prompts} CNN/DailyMail prompts, {args.sentences} sentences"
    )
    print("| row | path | s / text | tokens drawn / output token | sentences | p < 0.01 |")
    print("|---|---|---|---|---|---|")
    for name in args.schemes.split(","):
        scheme: Any = create_scheme(name, key=None if name == "unwatermarked" else key)
        scheme.generate_batch(prompts[:1], max_new_sentences=1, seed=0)  # load the model
        start = time.perf_counter()
        engine = scheme.generate_batch(prompts, max_new_sentences=args.sentences, seed=0)
        engine_s = (time.perf_counter() - start) / len(prompts)
        start = time.perf_counter()
        reference = generate_reference(scheme, prompts, args.sentences, seed=0)
        reference_s = (time.perf_counter() - start) / len(prompts)
        lm = scheme.lm
        runs = [
            ("engine", engine_s, [(g.text, g.tokens_sampled) for g in engine]),
            ("generate", reference_s, reference),
        ]
        for path, seconds, texts in runs:
            out = sum(lm.count_tokens(t) for t, _ in texts)
            drawn = sum(n for _, n in texts)
            n_sent = np.mean([len(split_sentences(t)) for t, _ in texts])
            detected = "-"
            if name != "unwatermarked":
                p = [scheme.detect(t).p_value if t.strip() else 1.0 for t, _ in texts]
                detected = f"{100 * np.mean(np.array(p) < 0.01):.0f}%"
            print(
                f"| {name} | {path} | {seconds:.1f} | {drawn / max(out, 1):.2f} | "
                f"{n_sent:.2f} | {detected} |"
            )


if __name__ == "__main__":
    main()
