"""What marking costs an operator: throughput under load and one request's latency, against
plain sampling on the same engine (issue 55).

A server under load fills its batch with other users' requests, so every candidate row a
mark draws takes a slot another user's token could have had. This benchmark measures both
figures an operator needs, on samark's transformers engine or in-process vLLM
(``--engine vllm``, run in the vLLM environment: ``.venv-vllm/bin/python``):

- **under load**: ``--concurrency`` requests at once (16 by default), each writing
  ``--sentences`` sentences after a CNN/DailyMail prompt. Plain sampling writes them as one
  batch (``write_many``: the engine's batch full of users); a marked row runs them as
  concurrent generations through one :class:`~samark.sampling.batching.BatchingEngine`, as
  ``samark serve`` does, so their candidate draws share batches (up to ``--max-rows`` rows).
  Figure: kept output tokens per second of wall time, and the plain row's over it (the cost
  under load).
- **one request alone**: the same, one request at a time: seconds per text and per sentence.
- **Tok/Out**: tokens the generator decoded per token kept.

Rows: plain sampling, then ``samark-layered`` with 64 keyed cells at each ``--candidates``
(projected null draws; the key is a fixed public test key). Prints a Markdown table and
writes JSON lines with ``--out``. Take it on a quiet machine: the timings are the point.

    python benchmarks/load_cost.py --concurrency 16 --sentences 3 --candidates 4,16,64
    python benchmarks/load_cost.py --candidates 64 --adaptive 4:0.5:24:32
    python benchmarks/load_cost.py --candidates "" --adaptive 4:0.5:24:32 --no-prefix-cache
    .venv-vllm/bin/python benchmarks/load_cost.py --engine vllm --candidates 4,16,64
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import threading
import time
from typing import Any

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=["transformers", "vllm"], default="transformers")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--sentences", type=int, default=3)
    ap.add_argument("--candidates", default="4,16,64", help="plain rows' N; '' for none")
    ap.add_argument(
        "--adaptive",
        action="append",
        default=[],
        metavar="CHUNK:SATURATION:PATIENCE:CAP",
        help="a row that stops a step once its evidence suffices (SAMarkConfig.adaptive), "
        "e.g. 4:0.5:24:32; repeatable",
    )
    ap.add_argument("--single", type=int, default=2, help="requests timed alone per row")
    ap.add_argument("--max-rows", type=int, default=512)
    ap.add_argument("--threads", type=int, default=1, help="torch threads of this process")
    ap.add_argument("--out", default=None, help="JSONL: one line per row")
    ap.add_argument(
        "--no-prefix-cache",
        action="store_true",
        help="transformers: prefill a request's context on every call, as before 2026-12-05 "
        "(the 'before' of the prefix cache)",
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from samark.datasets import load_dataset, prompt_examples
    from samark.embed import load_embedder
    from samark.keys import WatermarkKey
    from samark.keys.samark_material import PivotDraw
    from samark.models import DEFAULT_GENERATOR
    from samark.sampling.batching import BatchingEngine
    from samark.sampling.token_writing import WriteRequest
    from samark.schemes import create_scheme

    embedder = load_embedder("all-mpnet-base-v2")
    engine: Any
    if args.engine == "vllm":
        from samark.sampling.vllm_engine import TextRequest, load_vllm_engine

        engine = load_vllm_engine(DEFAULT_GENERATOR)
    else:
        from samark.sampling.transformers_engine import load_transformers_engine

        engine = load_transformers_engine(DEFAULT_GENERATOR)
        if args.no_prefix_cache:
            engine.prefixes = None
    key = WatermarkKey(
        b"load-cost-benchmark-key-00000000",
        embedder.identity,
        PivotDraw.avoiding(embedder.reference_directions(), 64, "projected"),
    )
    count = max(args.concurrency, args.single)
    prompts = [
        e.prompt
        for e in prompt_examples(
            load_dataset("cnn_dailymail"), prompt_sentences=3, sentences=12, count=count
        )
    ]
    special = tuple(sorted({int(i) for i in engine.tokenizer.all_special_ids}))

    def plain(batch: list[str], seed: int) -> tuple[int, int]:
        """(kept tokens, decoded tokens) of plain sampling, ``batch`` written together."""
        budget = 48 * args.sentences
        requests: list[Any] = [
            TextRequest(p, budget, args.sentences, seed=seed + i, suppress=special)
            if args.engine == "vllm"
            else WriteRequest(p, budget, seed=seed + i, suppress=special, sentences=args.sentences)
            for i, p in enumerate(batch)
        ]
        written = engine.write_many(requests)
        return sum(len(w.tokens) for w in written), sum(w.tokens_sampled for w in written)

    rows: list[dict[str, Any]] = []
    plain(prompts[:1], 0)  # warm-up: model, caches
    rows.append(_measure_plain(plain, prompts, args))
    marked: list[tuple[str, int, dict[str, Any]]] = [
        (f"samark-layered, 64 cells, N = {n}", n, {"candidates": n})
        for n in (int(x) for x in args.candidates.split(",") if x.strip())
    ]
    for spec in args.adaptive:
        chunk, saturation, patience, cap = spec.split(":")
        params = {
            "candidates": int(cap),
            "adaptive": True,
            "adaptive_chunk": int(chunk),
            "adaptive_saturation": float(saturation),
            "adaptive_patience": int(patience),
        }
        label = (
            f"samark-layered, 64 cells, stop at {saturation} "
            f"({chunk} to {cap}, patience {patience})"
        )
        marked.append((label, int(cap), params))
    for label, n, params in marked:
        batching = BatchingEngine(engine, max_rows=args.max_rows)
        scheme = create_scheme(
            "samark-layered", key=key, embedder=embedder, engine=batching, **params
        )
        scheme.generate(prompts[0][:200], max_new_sentences=1, seed=0)  # warm-up
        rows.append(_measure_marked(scheme, batching, label, n, prompts, args))
    _report(rows, args)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as sink:
            for row in rows:
                sink.write(json.dumps(row) + "\n")


def _measure_plain(plain: Any, prompts: list[str], args: argparse.Namespace) -> dict[str, Any]:
    single_s, single_tokens = [], 0
    for i in range(args.single):
        start = time.perf_counter()
        kept, _ = plain([prompts[i]], 100 + i)
        single_s.append(time.perf_counter() - start)
        single_tokens += kept
    start = time.perf_counter()
    kept, decoded = plain(prompts[: args.concurrency], 200)
    load_s = time.perf_counter() - start
    return _row("plain sampling", 1, kept, decoded, load_s, single_s, single_tokens, args)


def _measure_marked(
    scheme: Any, batching: Any, label: str, n: int, prompts: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    single_s, single_tokens = [], 0
    for i in range(args.single):
        start = time.perf_counter()
        gen = scheme.generate(prompts[i], max_new_sentences=args.sentences, seed=100 + i)
        single_s.append(time.perf_counter() - start)
        single_tokens += gen.output_tokens
    results: list[Any] = [None] * args.concurrency

    def one(i: int) -> None:
        with batching.caller():
            results[i] = scheme.generate(prompts[i], max_new_sentences=args.sentences, seed=200 + i)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(args.concurrency)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    load_s = time.perf_counter() - start
    kept = sum(g.output_tokens for g in results)
    decoded = sum(g.tokens_sampled for g in results)
    return _row(label, n, kept, decoded, load_s, single_s, single_tokens, args)


def _row(
    label: str,
    n: int,
    kept: int,
    decoded: int,
    load_s: float,
    single_s: list[float],
    single_tokens: int,
    args: argparse.Namespace,
) -> dict[str, Any]:
    return {
        "row": label,
        "engine": args.engine,
        "prefix_cache": args.engine == "transformers" and not args.no_prefix_cache,
        "candidates": n,
        "concurrency": args.concurrency,
        "sentences": args.sentences,
        "load_tokens_per_s": kept / load_s,
        "tok_per_out": decoded / max(kept, 1),
        "single_s_per_text": sum(single_s) / len(single_s),
        "single_s_per_sentence": sum(single_s) / len(single_s) / args.sentences,
        "single_tokens_per_s": single_tokens / sum(single_s),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "device": _device_name(),
        "torch_threads": args.threads,
        "date": time.strftime("%Y-%m-%d"),
    }


def _device_name() -> str:
    """The GPU the models ran on (samark.models.resolve_device), else "cpu"."""
    from samark.models import resolve_device

    device = torch.device(resolve_device())
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def _report(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    base = rows[0]
    print(
        f"\n{args.engine}: {args.concurrency} concurrent requests x {args.sentences} sentences "
        "under load; "
        f"{args.single} alone; {platform.machine()}, {os.cpu_count()} cores, device "
        f"{_device_name()}, torch "
        f"{torch.__version__}, {args.threads} torch thread(s); load average "
        f"{os.getloadavg()[0]:.2f}\n"
    )
    print(
        "| row | Tok/Out | tokens/s under load | cost under load | s per text alone | "
        "s per sentence alone | latency vs plain |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['row']} | {r['tok_per_out']:.1f} | {r['load_tokens_per_s']:.1f} | "
            f"{base['load_tokens_per_s'] / r['load_tokens_per_s']:.1f}x | "
            f"{r['single_s_per_text']:.1f} | {r['single_s_per_sentence']:.2f} | "
            f"{r['single_s_per_text'] / base['single_s_per_text']:.1f}x |"
        )


if __name__ == "__main__":
    main()
