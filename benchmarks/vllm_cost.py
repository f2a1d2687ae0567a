"""What marking costs against plain sampling, on one machine, in one run: the table an
operator reads before choosing.

Rows, each on the same prompts (the paper's CNN/DailyMail prompts, 3 sentences each) and
writing the same number of sentences, one prompt at a time (a single stream):

- through vLLM: plain sampling, vLLM's Gumbel watermark (``vllm-gumbel``), SAMark and the
  layered mark at N = 16 and 64;
- through samark's transformers engine: plain sampling, SAMark and the layered mark at
  N = 16 and 64.

For each: output tokens per second of wall time (the kept text's tokens; SAMark's embedding
and selection included) and its cost as a multiple of plain vLLM sampling's time for the
same text length (``cost = plain tokens/s / row tokens/s``). Prints a Markdown table and
writes one JSON line per text with ``--out``. Runs in the vLLM environment:

    .venv-vllm/bin/python benchmarks/vllm_cost.py --prompts 4 --sentences 3 --out cost.jsonl

Take it on a quiet machine: the timings are the point.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from samark.datasets import load_dataset, prompt_examples
from samark.embed import load_embedder
from samark.keys import WatermarkKey
from samark.models import DEFAULT_GENERATOR
from samark.schemes import create_scheme


@dataclass
class Row:
    label: str
    engine: str
    write: Callable[[str, int], tuple[str, int]]  # (prompt, seed) -> (text, output tokens)

    @property
    def name(self) -> str:
        return f"{self.label} ({self.engine})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--sentences", type=int, default=3)
    ap.add_argument("--candidates", default="16,64")
    ap.add_argument("--engines", default="vllm,transformers")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of this process")
    ap.add_argument("--out", default=None, help="JSONL: one line per text")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))

    embedder = load_embedder("all-mpnet-base-v2")
    key = WatermarkKey(b"vllm-cost-benchmark-key-00000000", embedder.identity)
    examples = prompt_examples(
        load_dataset("cnn_dailymail"), prompt_sentences=3, sentences=12, count=args.prompts
    )
    sizes = [int(n) for n in args.candidates.split(",")]
    rows = build_rows(args.engines.split(","), sizes, key, embedder, args.sentences)
    for row in rows:  # warm up every engine and row (first loads, caches)
        row.write(examples[0].prompt[:200], 0)
    load_before = os.getloadavg()[0]
    results: dict[str, list[tuple[float, int]]] = {r.name: [] for r in rows}
    sink = open(args.out, "w") if args.out else None  # noqa: SIM115
    for i, example in enumerate(examples):
        for row in rows:
            start = time.perf_counter()
            text, tokens = row.write(example.prompt, 100 + i)
            seconds = time.perf_counter() - start
            results[row.name].append((seconds, tokens))
            if sink:
                record = {
                    "row": row.label,
                    "engine": row.engine,
                    "item": i,
                    "seconds": seconds,
                    "output_tokens": tokens,
                    "text": text,
                }
                sink.write(json.dumps(record) + "\n")
                sink.flush()
            print(
                f"{row.name}: prompt {i + 1}/{len(examples)}, {tokens} tokens in {seconds:.1f} s",
                flush=True,
            )
    if sink:
        sink.close()
    report(rows, results, args, load_before, os.getloadavg()[0])


def build_rows(
    engines: list[str], sizes: list[int], key: WatermarkKey, embedder: Any, sentences: int
) -> list[Row]:
    rows: list[Row] = []
    for engine_name in engines:
        if engine_name == "vllm":
            from samark.sampling.vllm_engine import TextRequest, load_vllm_engine

            engine: Any = load_vllm_engine(DEFAULT_GENERATOR)
            gumbel = create_scheme("vllm-gumbel", key=key, engine=engine)
            special = tuple(sorted({int(i) for i in engine.tokenizer.all_special_ids}))

            def plain(
                prompt: str, seed: int, engine: Any = engine, special: tuple[int, ...] = special
            ) -> tuple[str, int]:
                request = TextRequest(
                    prompt, 48 * sentences, sentences, seed=seed, suppress=special
                )
                text = engine.decode(engine.write_many([request])[0].tokens)
                return text, engine.count_tokens(text)

            rows.append(Row("plain sampling", "vllm", plain))
            rows.append(Row("vLLM Gumbel", "vllm", _scheme_writer(gumbel, sentences, engine)))
        else:
            from samark.sampling.transformers_engine import load_transformers_engine

            engine = load_transformers_engine(DEFAULT_GENERATOR)
            plain_scheme = create_scheme("unwatermarked")
            rows.append(
                Row(
                    "plain sampling",
                    "transformers",
                    _scheme_writer(plain_scheme, sentences, engine),
                )
            )
        for name in ("samark", "samark-layered"):
            for n in sizes:
                scheme = create_scheme(
                    name,
                    key=key,
                    embedder=embedder,
                    engine=engine,
                    candidates=n,
                    statistic="scan",
                )
                label = f"{'SAMark' if name == 'samark' else 'layered'} N = {n}"
                rows.append(Row(label, engine_name, _scheme_writer(scheme, sentences, engine)))
    return rows


def _scheme_writer(
    scheme: Any, sentences: int, engine: Any
) -> Callable[[str, int], tuple[str, int]]:
    def write(prompt: str, seed: int) -> tuple[str, int]:
        gen = scheme.generate(prompt, max_new_sentences=sentences, seed=seed)
        return gen.text, engine.count_tokens(gen.text)

    return write


def report(
    rows: list[Row],
    results: dict[str, list[tuple[float, int]]],
    args: argparse.Namespace,
    load_before: float,
    load_after: float,
) -> None:
    def rate(values: list[tuple[float, int]]) -> float:
        return sum(t for _, t in values) / sum(s for s, _ in values)

    base_name = "plain sampling (vllm)"
    base = rate(results[base_name]) if base_name in results else None
    print()
    print(
        f"{args.prompts} prompts x {args.sentences} sentences, one at a time; "
        f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"{args.threads} torch thread(s) in this process; load {load_before:.2f} -> "
        f"{load_after:.2f}"
    )
    print()
    print("| engine | row | output tokens/s | s per text | cost vs plain vLLM |")
    print("|---|---|---|---|---|")
    for r in rows:
        values = results[r.name]
        tps = rate(values)
        per_text = sum(s for s, _ in values) / len(values)
        cost = f"{base / tps:.1f}x" if base else "-"
        print(f"| {r.engine} | {r.label} | {tps:.1f} | {per_text:.1f} | {cost} |")


if __name__ == "__main__":
    main()
