"""Unigram's false-positive rate measured both ways on human text (issue 66): MarkLLM 0.1.5's
z (every token counted, normal approximation) at its threshold 4 and at 2.326 (one-sided
p < 0.01), against samark's exact hypergeometric test on distinct tokens at p < 0.01, on the
*same* green lists (the reference's shuffled mask, ``samark keygen --scheme unigram
--hash-key N``), per key, with the binomial spread a calibrated test would show.

Negatives: 6-sentence (``--sentences``) windows of the CNN/DailyMail articles samark ships
(articles 100+, none a prompt of the paper run), tokenized with SmolLM2-135M's tokenizer.
Keys: MarkLLM's default ``hash_key`` 15485863 and ``--keys - 1`` integers drawn from a fixed
seed (public study keys, not secrets). MarkLLM's own detector scores every text under the
default key and the vectorised counts must equal it; samark's Unigram scheme likewise.

    python -m benchmarks.studies.unigram_fpr_markllm --keys 200 --texts 100 \
        -o docs/results/2026-12-05-markllm/unigram_fpr_6.json
    python -m benchmarks.studies.unigram_fpr_markllm --keys 200 --texts 100 --sentences 12 \
        -o docs/results/2026-12-05-markllm/unigram_fpr_12.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
from scipy.stats import binom, hypergeom

MARKLLM_HASH_KEY = 15485863
GAMMA = 0.5
ALPHA = 0.01
Z_ALPHA = 2.326  # one-sided normal quantile at 0.01, as MarkLLM users set it
Z_MARKLLM = 4.0  # MarkLLM's shipped threshold


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson 95% interval of a proportion k / n."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def run(keys: int, texts: int, sentences: int = 6) -> dict:
    import torch

    from samark.datasets import human_windows, load_dataset
    from samark.evaluation.markllm_offline import offline
    from samark.keys import EmbedderIdentity, WatermarkKey
    from samark.models import generator_tokenizer, resolve_generator
    from samark.schemes import create_scheme
    from samark.schemes.unigram import reference_green_mask

    with offline():
        from markllm.utils.transformers_config import TransformersConfig
        from markllm.watermark.unigram.unigram import Unigram as MarkLLMUnigram

    _, path = resolve_generator("smollm2-135m-instruct")
    tok = generator_tokenizer(str(path))
    vocab = len(tok)
    windows = human_windows(load_dataset("cnn_dailymail")[100:], sentences=sentences, count=texts)
    ids = [np.array(tok(w.text, add_special_tokens=False)["input_ids"]) for w in windows]
    distinct = [np.unique(x) for x in ids]
    n_all = np.array([len(x) for x in ids])
    n_distinct = np.array([len(x) for x in distinct])
    k_green = int(GAMMA * vocab)

    rng = np.random.default_rng(66)
    hash_keys = [MARKLLM_HASH_KEY, *(int(h) for h in rng.integers(1, 2**31, size=keys - 1))]
    rows = []
    for h in hash_keys:
        green = reference_green_mask(h, vocab, k_green)
        g_all = np.array([int(green[x].sum()) for x in ids])
        g_distinct = np.array([int(green[x].sum()) for x in distinct])
        z_markllm = (g_all - GAMMA * n_all) / np.sqrt(n_all * GAMMA * (1 - GAMMA))
        p_exact = hypergeom.sf(g_distinct - 1, vocab, k_green, n_distinct)
        rows.append(
            {
                "hash_key": h,
                "markllm_z": z_markllm.tolist(),
                "samark_p": p_exact.tolist(),
            }
        )

    # the vectorised counts are the two toolkits' own, under MarkLLM's default key
    config = TransformersConfig(model=None, tokenizer=tok, vocab_size=vocab, device="cpu")
    reference = MarkLLMUnigram(None, config)
    key = WatermarkKey(
        b"unigram-fpr-study-key-0000000000",
        EmbedderIdentity("none", "0" * 64),
        hash_key=MARKLLM_HASH_KEY,
    )
    ours = create_scheme("unigram", key=key, gamma=GAMMA)
    torch.set_num_threads(1)
    for w, z, p in zip(windows, rows[0]["markllm_z"], rows[0]["samark_p"], strict=True):
        assert math.isclose(reference.detect_watermark(w.text)["score"], z, rel_tol=1e-12)
        assert math.isclose(ours.detect(w.text).p_value, p, rel_tol=1e-9, abs_tol=1e-300)
    return {
        "texts": len(windows),
        "sentences": sentences,
        "tokens_mean": float(n_all.mean()),
        "distinct_tokens_mean": float(n_distinct.mean()),
        "vocab": vocab,
        "gamma": GAMMA,
        "keys": rows,
    }


#: the three decision rules, by the name the tables give them
RULES = {
    "MarkLLM z > 4 (its threshold)": ("markllm_z", Z_MARKLLM),
    "MarkLLM z > 2.326 (p < 0.01)": ("markllm_z", Z_ALPHA),
    "samark exact, distinct tokens, p < 0.01": ("samark_p", ALPHA),
}


def false_positives(row: dict) -> dict[str, int]:
    """One key's false positives under each rule."""
    out = {}
    for name, (field, cut) in RULES.items():
        values = np.array(row[field])
        out[name] = int((values > cut).sum() if field == "markllm_z" else (values < cut).sum())
    return out


def compact(result: dict) -> dict:
    """What the results folder keeps: every key's false positives under each rule, and
    the default key's per-text values (not 20,000 numbers per run)."""
    first = result["keys"][0]
    return {
        **{k: v for k, v in result.items() if k != "keys"},
        "default_key": {
            "markllm_z": [round(z, 4) for z in first["markllm_z"]],
            "samark_p": [float(f"{p:.4g}") for p in first["samark_p"]],
        },
        "false_positives": [false_positives(r) for r in result["keys"]],
    }


def summary(result: dict) -> str:
    n = result["texts"]
    counts = result["false_positives"]
    lo, hi = binom.ppf(0.025, n, ALPHA), binom.ppf(0.975, n, ALPHA)
    lines = [
        f"{n} human texts of {result.get('sentences', 6)} sentences (mean "
        f"{result['tokens_mean']:.0f} tokens, {result['distinct_tokens_mean']:.0f} distinct), "
        f"{len(counts)} keys, gamma {result['gamma']}; a calibrated level-0.01 test gives "
        f"each key Binomial({n}, 0.01) false positives: 95% of keys within "
        f"[{lo:.0f}, {hi:.0f}], mean {n * ALPHA:.2f}",
        "",
        "| rule | FPR pooled (95% CI) | false positives per key: mean / median / "
        "95th pct / max | keys outside the binomial 95% range | MarkLLM's default key |",
        "|---|---|---|---|---|",
    ]
    for name in RULES:
        per_key = np.array([c[name] for c in counts])
        total = int(per_key.sum())
        trials = n * len(per_key)
        a, b = wilson(total, trials)
        outside = int(((per_key < lo) | (per_key > hi)).sum())
        lines.append(
            f"| {name} | {total / trials:.4f} ({a:.4f}-{b:.4f}) | {per_key.mean():.2f} / "
            f"{np.median(per_key):.0f} / {np.percentile(per_key, 95):.0f} / {per_key.max()} | "
            f"{outside} of {len(per_key)} | {per_key[0]} of {n} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=200)
    parser.add_argument("--texts", type=int, default=100)
    parser.add_argument("--sentences", type=int, default=6, help="sentences a human text")
    parser.add_argument("-o", "--out", type=Path)
    parser.add_argument("--table", type=Path, help="print the table of a stored result")
    args = parser.parse_args()
    if args.table:
        print(summary(json.loads(args.table.read_text())))
        return
    result = compact(run(args.keys, args.texts, args.sentences))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result) + "\n")
    print(summary(result))


if __name__ == "__main__":
    main()
