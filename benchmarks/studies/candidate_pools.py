"""Candidate pools written once, replayed under any key and any selection rule (issue 44).

``record`` writes, for each prompt of the paper protocol (CNN/DailyMail, 3-sentence
prompts), an unwatermarked trajectory of ``--sentences`` steps: at each step the generator
(SmolLM2-135M-Instruct, the demo's and the paper run's) draws ``--candidates`` sentence
candidates after the text so far, every complete candidate is written down, and the step
continues with a key-independent choice (the first candidate that passes SAMark's hard
filters: plain sampling under the same filters). One JSON line per step: the prompt's
index, the step, the candidates' texts and the index continued with. The pools do not
depend on any key, so a selection rule under a key is *replayed* on them offline: at step
t it picks among pool t. The replayed pick's context is the plain trajectory's, not its
own: its text drifts less towards the key than a real generation would (a screening tool;
the winner is checked by real generation).

    python benchmarks/studies/candidate_pools.py record \\
        -o experiments/runs/candidate-pools/pools.jsonl --prompts 40 --sentences 6

Resumes per prompt. Embeddings are a cache next to the records (``*.emb.npy``, not
committed: ``python benchmarks/studies/candidate_pools.py embed`` rebuilds them).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import numpy as np


def record(args: argparse.Namespace) -> None:
    import torch

    from samark.datasets import load_dataset, prompt_examples
    from samark.embed import load_embedder, new_key
    from samark.sampling.transformers_engine import load_transformers_engine
    from samark.schemes.samark import SAMark
    from samark.schemes.samark.config import SAMarkConfig
    from samark.schemes.samark.selection import ngram_overlap, semantic_similarity
    from samark.schemes.sentence_loop import Pick

    torch.set_num_threads(1)
    embedder = load_embedder("all-mpnet-base-v2")
    lm = load_transformers_engine("smollm2-135m-instruct")
    examples = prompt_examples(
        load_dataset("cnn_dailymail"), prompt_sentences=3, sentences=12, count=args.prompts
    )
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = {json.loads(line)["prompt_index"] for line in out.open()} if out.exists() else set()

    class Plain(SAMark):
        """SAMark's loop and hard filters, continuing with the first candidate that passes
        them (no key in the choice); every step's pool written down."""

        lines: list[dict[str, Any]]
        prompt_index = 0

        def pick(self, state: Any, texts: list[str], pool: np.ndarray) -> Pick | None:
            base = super().pick(state, texts, pool)
            c = self.config
            rho = semantic_similarity(pool, state.history)
            ok = [
                bool(
                    ngram_overlap(t, state.context_ngrams, c.selection.ngram_n)
                    < c.selection.theta_ngram
                )
                and bool(r < c.selection.theta_sem)
                for t, r in zip(texts, rho, strict=True)
            ]
            index = ok.index(True) if any(ok) else 0
            self.lines.append(
                {
                    "prompt_index": self.prompt_index,
                    "step": len(state.history),
                    "candidates": list(texts),
                    "continued": index,
                    "hard_ok": ok,
                    "embeddings": pool.astype(np.float16),
                }
            )
            assert base is not None
            # the base pick's counts drive the loop; only the continued index changes
            return Pick(index, base.kind, dataclasses.replace(base.detail, n_matched=1))

    config = SAMarkConfig.of(
        candidates=args.candidates, max_new_sentences=args.sentences, extra_batches=0
    )
    for p, ex in enumerate(examples):
        if p in done or p < args.start:
            continue
        scheme = Plain(new_key(embedder), config=config, embedder=embedder, engine=lm)
        scheme.lines, scheme.prompt_index = [], p
        start = time.perf_counter()
        scheme.generate(ex.prompt, seed=args.seed + p)
        emb_path = out.with_name(f"{out.stem.split('-')[0]}.p{p:03d}.emb.npy")
        np.save(emb_path, np.concatenate([line.pop("embeddings") for line in scheme.lines]))
        with out.open("a") as f:
            for line in scheme.lines:
                line["prompt"] = ex.prompt
                line["human"] = ex.human
                f.write(json.dumps(line) + "\n")
        print(
            f"prompt {p + 1}/{len(examples)}: {len(scheme.lines)} steps, "
            f"{sum(len(s['candidates']) for s in scheme.lines)} candidates, "
            f"{time.perf_counter() - start:.0f} s",
            flush=True,
        )


def load_pools(path: Path, *, embed: bool = True) -> list[list[dict[str, Any]]]:
    """The recorded steps of ``path`` and of its siblings ``<stem>-*.jsonl`` (parallel
    writers), grouped by prompt (each step with ``embeddings`` (m, dim) float32,
    from the cache or computed and cached)."""
    by_prompt: dict[int, list[dict[str, Any]]] = {}
    for file in [path, *sorted(path.parent.glob(f"{path.stem}-*.jsonl"))]:
        for line in file.open():
            s = json.loads(line)
            by_prompt.setdefault(s["prompt_index"], []).append(s)
    prompts = [sorted(v, key=lambda s: s["step"]) for _, v in sorted(by_prompt.items())]
    if not embed:
        return prompts
    embedder = None
    for steps in prompts:
        p = steps[0]["prompt_index"]
        cache = path.with_name(f"{path.stem.split('-')[0]}.p{p:03d}.emb.npy")
        if cache.exists():
            emb = np.load(cache).astype(np.float32)
        else:
            if embedder is None:
                from samark.embed import load_embedder

                embedder = load_embedder("all-mpnet-base-v2")
            emb = embedder.encode([c for s in steps for c in s["candidates"]]).astype(np.float32)
            np.save(cache, emb.astype(np.float16))
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)
        bounds = np.cumsum([0, *(len(s["candidates"]) for s in steps)])
        for i, s in enumerate(steps):
            s["embeddings"] = emb[bounds[i] : bounds[i + 1]]
    return prompts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="write candidate pools on the CPU")
    rec.add_argument("-o", "--output", required=True)
    rec.add_argument("--prompts", type=int, default=40)
    rec.add_argument("--sentences", type=int, default=6)
    rec.add_argument("--candidates", type=int, default=64)
    rec.add_argument("--seed", type=int, default=0)
    rec.add_argument("--start", type=int, default=0, help="skip the prompts before this one")
    emb = sub.add_parser("embed", help="rebuild the embedding cache of a records file")
    emb.add_argument("records")
    args = parser.parse_args()
    if args.command == "record":
        record(args)
    else:
        load_pools(Path(args.records))


if __name__ == "__main__":
    main()
