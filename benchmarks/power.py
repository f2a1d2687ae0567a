"""Power of SAMark detection with the paper's defaults on CNN/DailyMail prompts.

Generates (resumably: finished prompts are skipped) ``--sentences`` watermarked sentences
for each of ``--prompts`` prompts (the article's first 3 sentences), then reports the share
of outputs with p < 0.01 at 6 sentences (the first 6) and at all sentences, for each test
statistic, as generated and after shuffling the sentences, plus generation cost.

    python benchmarks/power.py --prompts 10 --sentences 12 --out runs/power
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np

from samark.datasets import load_dataset
from samark.embed import load_embedder, new_key
from samark.keys import WatermarkKey
from samark.schemes.samark import SAMark
from samark.schemes.samark.config import SAMarkConfig, SAMarkDetection
from samark.schemes.samark.detector import SAMarkDetector
from samark.segment import split_sentences


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=10)
    ap.add_argument("--sentences", type=int, default=12)
    ap.add_argument("--candidates", type=int, default=64)
    ap.add_argument("--prompt-sentences", type=int, default=3)
    ap.add_argument("--dagger", action="store_true", help="SAMark-dagger (diversity off)")
    ap.add_argument("--out", type=Path, default=Path("runs/power"))
    args = ap.parse_args()

    args.out.mkdir(parents=True, exist_ok=True)
    embedder = load_embedder("all-mpnet-base-v2")
    key_path = args.out / "power.key"
    key = WatermarkKey.load(key_path) if key_path.exists() else new_key(embedder)
    if not key_path.exists():
        key.save(key_path)
    fields = dict(candidates=args.candidates, max_new_sentences=args.sentences)
    config = SAMarkConfig.dagger(**fields) if args.dagger else SAMarkConfig.of(**fields)
    scheme = SAMark(key, config=config, embedder=embedder)

    records_path = args.out / "generations.jsonl"
    done = set()
    if records_path.exists():
        done = {json.loads(line)["id"] for line in records_path.read_text().splitlines() if line}
    docs = load_dataset("cnn_dailymail")[: args.prompts]
    for i, doc in enumerate(docs):
        if doc.id in done:
            continue
        prompt = " ".join(split_sentences(doc.text)[: args.prompt_sentences])
        t0 = time.perf_counter()
        gen = scheme.generate(prompt, seed=i)
        rec = {"id": doc.id, **gen.to_dict()}
        with records_path.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        print(
            f"[{i + 1}/{len(docs)}] {len(gen.sentences)} sentences in "
            f"{time.perf_counter() - t0:.0f}s, fallbacks {gen.fallbacks}",
            flush=True,
        )

    records = [json.loads(line) for line in records_path.read_text().splitlines() if line]
    records = [r for r in records if r["id"] in {d.id for d in docs}]
    n_sent = sum(len(r["sentences"]) for r in records)
    secs = sum(r["seconds"] for r in records)
    tok_out = sum(r["tokens_sampled"] for r in records) / sum(r["output_tokens"] for r in records)
    print(
        f"\n{len(records)} generations, {n_sent} sentences: {secs / n_sent:.1f} s/sentence, "
        f"Tok/Out {tok_out:.1f}, "
        f"sampling share {sum(r['sampling_seconds'] for r in records) / secs:.0%}, "
        f"fallbacks {sum(sum(r['fallbacks'].values()) for r in records)} of {n_sent} steps"
    )
    rng = random.Random(0)
    for statistic in ("z", "alignment"):
        det = SAMarkDetector(key, embedder, SAMarkDetection(statistic=statistic))  # type: ignore[arg-type]
        for k in (6, args.sentences):
            for shuffled in (False, True):
                ps = []
                for r in records:
                    sents = list(r["sentences"][:k])
                    if shuffled:
                        rng.shuffle(sents)
                    ps.append(det.detect(" ".join(sents)).p_value)
                ps_arr = np.array(ps)
                print(
                    f"[{statistic:9s}] {k:2d} sentences{' shuffled' if shuffled else '         '}: "
                    f"p<0.01 in {np.mean(ps_arr < 0.01):.0%}  (median p {np.median(ps_arr):.4f}, "
                    f"max {ps_arr.max():.4f})"
                )


if __name__ == "__main__":
    main()
