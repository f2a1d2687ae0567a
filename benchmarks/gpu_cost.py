"""What marking costs on a GPU: samark's transformers engine replaying real candidate
draws on untrained weights, against plain sampling (issue 55).

The lent GPU machine gets no models (a call carries 64 MiB; the default generator and
embedder are about 1 GB), so this benchmark builds both from their configs with untrained
weights. A decode step's compute depends on shapes (rows, prefix and suffix lengths, layers,
vocabulary), not on the weights' values; the rows are real instead. ``--make-shapes`` (run
where the models are installed) records the candidate pools of
``experiments/runs/candidate-pools`` (132 sentence steps of the default generator on
CNN/DailyMail prompts, about 31 candidates each: every candidate's token ids and its length
in embedder tokens, each step's prefix length and kept sentence) with the two models'
configs into ``benchmarks/data/gpu_cost_shapes.json``, and the generator's tokenizer into
``.gpu/tokenizer``. The replay then runs, for ``C`` concurrent requests of ``S`` sentences:

- **plain sampling**: one batch of ``C`` rows (``BatchDecoder.for_prefixes``, the batch the
  engine's ``write_many`` decodes), each row writing the sentences its steps kept;
- **marked at N**: per sentence, ``N`` rows per request (drawn from the step's recorded
  candidates), every request's rows in one batch through shared-prefix attention (as
  ``BatchingEngine`` batches concurrent draws); then the embedder encodes the ``C x N``
  candidates at their recorded lengths (mean pooling, batches of 64 sorted by length, as
  sentence-transformers does). One round's time is scaled by the measured Tok/Out over
  the round's own (rows decoding past a sentence's end, redraws of unmatched steps).

Each step samples every live row with the engine's sampler (``sample_top_p``, a request at
a time; the marked rows with the layered mark's token layer, its keyed green-list bias,
computed on the device by ``GreenListLayer.bias_on`` on a GPU; on logits sharpened so
that its common top-256 path runs, as a trained model's does), reads the picks back once,
feeds the recorded token, and does the engine's per-row work on the CPU with the real
tokenizer and segmenter (the token's piece, sentence-end hints, the segmenter's checks); a
row leaves the batch where its recorded row ends. Left out: the selection (cosines,
filters, softmax over at most N rows) and the tokenizers' encoding of the prefix. The
plain rows sample on the device too: samark's own written rows run transformers'
processors on the CPU one row at a time, which on a GPU would slow plain sampling and
flatter the mark, so the baseline here is the faster one. ``--device cpu`` replays here,
to compare with ``load_cost.py``'s real figure.

    python -m benchmarks.gpu_cost --make-shapes
    python -m benchmarks.gpu_cost --device cuda --concurrency 1,16,64 --candidates 4,16,64
    python -m benchmarks.gpu_cost --device cpu --concurrency 16 --candidates 64 --sentences 2

The one GPU call is ``benchmarks/gpu_cost.sh`` (its header says how to prepare it).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

SHAPES = Path(__file__).parent / "data" / "gpu_cost_shapes.json"
TOKENIZER = Path(".gpu/tokenizer")  # ignored; carried to the device call
POOLS = Path("experiments/runs/candidate-pools/pools.jsonl")
#: Tok/Out of the default run (experiments/runs/default, 40 texts each): decoded tokens per
#: kept token, redraws included
MEASURED_TOK_OUT = {4: 6.1, 8: 10.4, 16: 18.2, 32: 36.1, 64: 71.7}
EMBED_BATCH = 64  # samark.embed.Embedder's default batch
SHARPEN = 100.0  # untrained logits (sd about 0.5) times this: a peaked next-token law


def make_shapes() -> None:
    """Record the real draws (token ids and embedder lengths) and the models' configs
    (needs the models), and copy the generator's tokenizer to ``.gpu/tokenizer`` for the
    device call."""
    from transformers import AutoConfig, AutoTokenizer

    from samark.models import (
        DEFAULT_EMBEDDER,
        DEFAULT_GENERATOR,
        resolve_embedder,
        resolve_generator,
    )

    _, gen_path = resolve_generator(DEFAULT_GENERATOR)
    _, emb_path = resolve_embedder(DEFAULT_EMBEDDER)
    gen_tok = AutoTokenizer.from_pretrained(gen_path)
    emb_tok = AutoTokenizer.from_pretrained(emb_path)
    records = [json.loads(line) for line in POOLS.read_text().splitlines()]
    records.sort(key=lambda r: (r["prompt_index"], r["step"]))
    steps, kept_text = [], {}
    for r in records:
        earlier = kept_text.get(r["prompt_index"], "")
        prefix = gen_tok(r["prompt"] + earlier, add_special_tokens=True)["input_ids"]
        cands = [c for c in r["candidates"] if c]
        picked = r["candidates"][r["continued"]] or cands[0]
        kept_text[r["prompt_index"]] = earlier + picked
        steps.append(
            {
                "prompt": r["prompt_index"],
                "prefix": len(prefix),
                "candidates": [gen_tok(c, add_special_tokens=False)["input_ids"] for c in cands],
                "embedder_tokens": [min(len(emb_tok(c.strip())["input_ids"]), 384) for c in cands],
                "kept": gen_tok(picked, add_special_tokens=False)["input_ids"],
            }
        )
    out = {
        "source": str(POOLS),
        "generator": DEFAULT_GENERATOR,
        "embedder": DEFAULT_EMBEDDER,
        "generator_config": AutoConfig.from_pretrained(gen_path).to_dict(),
        "embedder_config": AutoConfig.from_pretrained(emb_path).to_dict(),
        "steps": steps,
    }
    SHAPES.parent.mkdir(parents=True, exist_ok=True)
    SHAPES.write_text(json.dumps(out, separators=(",", ":")) + "\n")
    gen_tok.save_pretrained(TOKENIZER)
    cand = [len(c) for s in steps for c in s["candidates"]]
    print(
        f"{SHAPES}: {len(steps)} steps, {len(cand)} candidates, mean {np.mean(cand):.1f} "
        f"generator tokens, prefix mean {np.mean([s['prefix'] for s in steps]):.0f}; "
        f"tokenizer in {TOKENIZER}"
    )


def _models(shapes: dict[str, Any], device: torch.device, dtype: torch.dtype) -> tuple[Any, Any]:
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    def config(d: dict[str, Any]) -> Any:
        d = dict(d)
        return AutoConfig.for_model(d.pop("model_type"), **d)

    torch.manual_seed(0)
    gen = AutoModelForCausalLM.from_config(config(shapes["generator_config"]), dtype=dtype)
    emb = AutoModel.from_config(config(shapes["embedder_config"]), dtype=dtype)
    return gen.to(device).eval(), emb.to(device).eval()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _sample(
    logits: torch.Tensor, generator: torch.Generator, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """The engine's sampler on logits sharpened so that the nucleus fits in the top 256
    tokens, as a trained model's usually does (its common, fast path)."""
    from samark.sampling.transformers_engine import sample_top_p

    return sample_top_p(logits * SHARPEN, 0.7, 0.95, generator, bias)


class _Rows:
    """The recorded rows of one batch and the engine's per-token work on them: a candidate
    row's as ``_Draw.advance`` does it (the token's piece, the sentence-end hints, the
    segmenter at a word's start once a hint was seen), a written row's as
    ``Writing._sentences_done`` does it."""

    def __init__(self, tokenizer: Any, rows: list[list[int]], written: bool) -> None:
        self.tokenizer, self.rows, self.written = tokenizer, rows, written
        self.hinted = [False] * len(rows)

    def work(self, row: int, step: int) -> None:
        from samark.segment import (
            SENTENCE_END_HINTS,
            first_sentence,
            segmenter_due,
            split_sentences,
        )

        tokens = self.rows[row][: step + 1]
        piece = str(self.tokenizer.decode([tokens[-1]]))
        if self.written:
            hint = any(h in piece for h in SENTENCE_END_HINTS)
            if not hint and self.hinted[row] and piece[:1].isspace():
                self.hinted[row] = False
                split_sentences(self.tokenizer.decode(tokens, skip_special_tokens=True))
            self.hinted[row] = self.hinted[row] or hint
            return
        due, self.hinted[row] = segmenter_due(piece, self.hinted[row])
        if due:
            first_sentence(self.tokenizer.decode(tokens, skip_special_tokens=True))


def _decode(
    model: Any,
    prefixes: list[int],
    groups: list[list[list[int]]],
    vocab: int,
    generator: torch.Generator,
    tokenizer: Any,
    written: bool = False,
    token_layer: Any = None,
) -> None:
    """Decode ``groups[g]`` (recorded token rows) after a prefix of ``prefixes[g]`` random
    tokens, every group in one batch, as the engine does: sample each live row's next
    token (its cost; the recorded token is the one fed), do the engine's per-row work, drop
    the rows that ended."""
    from samark.sampling.transformers_engine import BatchDecoder, row_bias

    device = model.device
    ids = [torch.randint(0, vocab, (p,)).tolist() for p in prefixes]
    flat = [row for g in groups for row in g]
    group_of = [i for i, g in enumerate(groups) for _ in g]
    rows = _Rows(tokenizer, flat, written)
    longest = max(len(r) for r in flat)
    decoder = BatchDecoder.for_prefixes(model, ids, [len(g) for g in groups], longest)
    live = list(range(len(flat)))
    logits = decoder.logits
    for step in range(longest):
        # each request samples its own rows and reads its picks back once, as the engine's
        # draws do (one call and one random stream a request)
        start = 0
        for group, members in itertools.groupby(live, key=group_of.__getitem__):
            end = start + sum(1 for _ in members)
            bias = None
            if token_layer is not None:  # the layered mark's token layer, on every row
                mine = [flat[r][:step] for r in live[start:end]]
                bias = row_bias(token_layer, ids[group], mine, logits.shape[-1], device)
            _sample(logits[start:end], generator, bias).tolist()
            start = end
        going = []
        for b, row in enumerate(live):
            rows.work(row, step)
            if len(flat[row]) > step + 1:
                going.append(b)
        if not going:
            break
        if len(going) < len(live):
            decoder.keep(going)
            live = [live[b] for b in going]
        fed = torch.tensor([flat[row][step] for row in live], device=device)
        logits = decoder.step(fed)


def _embed(model: Any, lengths: list[int], vocab: int, device: torch.device) -> None:
    """Encode sentences of these token lengths: batches sorted by length, mean pooling,
    unit norm, back to the CPU (as ``Embedder.encode`` returns numpy)."""
    order = sorted(lengths, reverse=True)
    for i in range(0, len(order), EMBED_BATCH):
        batch = order[i : i + EMBED_BATCH]
        width = batch[0]
        ids = torch.randint(0, vocab, (len(batch), width), device=device)
        mask = (
            torch.arange(width, device=device)[None, :]
            < torch.tensor(batch, device=device)[:, None]
        ).long()
        hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
        pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        torch.nn.functional.normalize(pooled.float(), dim=-1).cpu()


def _requests(
    steps: list[dict[str, Any]], count: int, sentences: int
) -> list[list[dict[str, Any]]]:
    """``count`` requests, each ``sentences`` consecutive steps of one prompt (cycling)."""
    by_prompt: dict[int, list[dict[str, Any]]] = {}
    for s in steps:
        by_prompt.setdefault(s["prompt"], []).append(s)
    runs = [
        v[i : i + sentences]
        for v in by_prompt.values()
        for i in range(0, len(v) - sentences + 1, sentences)
    ]
    if not runs:
        raise SystemExit(f"no prompt of the shapes has {sentences} steps")
    return [runs[i % len(runs)] for i in range(count)]


@torch.inference_mode()
def replay(args: argparse.Namespace) -> list[dict[str, Any]]:
    from transformers import AutoTokenizer

    from samark.token_layer import GreenListLayer

    shapes = json.loads(SHAPES.read_text())
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    gen, emb = _models(shapes, device, dtype)
    if TOKENIZER.is_dir():
        tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    else:  # where the models are installed
        from samark.models import DEFAULT_GENERATOR, resolve_generator

        tokenizer = AutoTokenizer.from_pretrained(resolve_generator(DEFAULT_GENERATOR)[1])
    gvocab = int(shapes["generator_config"]["vocab_size"])
    evocab = int(shapes["embedder_config"]["vocab_size"])
    rng = np.random.default_rng(0)
    generator = torch.Generator(device=device).manual_seed(0)
    # the default mark's token layer (its default parameters), biasing every candidate row
    layer = GreenListLayer(b"gpu-cost-replay-key-0000", gvocab)
    rows: list[dict[str, Any]] = []
    meta = {
        "device": (
            torch.cuda.get_device_name(device)
            if device.type == "cuda"
            else f"{platform.machine()}, {os.cpu_count()} cores"
        ),
        "dtype": args.dtype,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "date": time.strftime("%Y-%m-%d"),
    }

    def keep(row: dict[str, Any]) -> None:
        """A finished row: kept, written at once (a later row may run out of time)."""
        row.update(meta)
        rows.append(row)
        print(f"done: {row['row']}, concurrency {row['concurrency']}", file=sys.stderr)
        if args.out:
            with open(args.out, "a", encoding="utf-8") as sink:
                sink.write(json.dumps(row) + "\n")

    def timed(fn: Any, *fn_args: Any) -> float:
        _sync(device)
        start = time.perf_counter()
        fn(*fn_args)
        _sync(device)
        return time.perf_counter() - start

    for concurrency in args.concurrency:
        requests = _requests(shapes["steps"], concurrency, args.sentences)
        # warm-up: kernels, allocator
        warm = [[r[0]["kept"][:8]] for r in requests]
        _decode(gen, [r[0]["prefix"] for r in requests], warm, gvocab, generator, tokenizer)
        _embed(emb, [16] * 8, evocab, device)
        kept = sum(len(s["kept"]) for r in requests for s in r)
        plain_s = timed(
            _decode,
            gen,
            [r[0]["prefix"] for r in requests],
            [[[t for s in r for t in s["kept"]]] for r in requests],
            gvocab,
            generator,
            tokenizer,
            True,
        )
        base = {"concurrency": concurrency, "sentences": args.sentences, "kept_tokens": kept}
        keep(
            {
                **base,
                "row": "plain sampling",
                "candidates": 1,
                "seconds": plain_s,
                "tok_per_out": 1.0,
                "tokens_per_s": kept / plain_s,
            }
        )
        for n in args.candidates:
            decode_s = embed_s = 0.0
            decoded = 0
            for k in range(args.sentences):
                steps = [r[k] for r in requests]
                picks = [
                    rng.choice(len(s["candidates"]), n, replace=n > len(s["candidates"]))
                    for s in steps
                ]
                draws = [
                    [s["candidates"][int(i)] for i in pick]
                    for s, pick in zip(steps, picks, strict=True)
                ]
                emb_lengths = [
                    s["embedder_tokens"][int(i)]
                    for s, pick in zip(steps, picks, strict=True)
                    for i in pick
                ]
                decoded += sum(len(c) for d in draws for c in d)
                prefixes = [s["prefix"] for s in steps]
                decode_s += timed(
                    _decode, gen, prefixes, draws, gvocab, generator, tokenizer, False, layer
                )
                embed_s += timed(_embed, emb, emb_lengths, evocab, device)
            round_tok_out = decoded / kept
            scale = MEASURED_TOK_OUT.get(n, round_tok_out) / round_tok_out
            seconds = (decode_s + embed_s) * scale
            keep(
                {
                    **base,
                    "row": f"samark-layered, N = {n}",
                    "candidates": n,
                    "seconds": seconds,
                    "decode_s": decode_s * scale,
                    "embed_s": embed_s * scale,
                    "round_tok_out": round_tok_out,
                    "tok_per_out": round_tok_out * scale,
                    "tokens_per_s": kept / seconds,
                    "cost_vs_plain": seconds / plain_s,
                }
            )
    return rows


def _report(rows: list[dict[str, Any]]) -> None:
    r0 = rows[0]
    print(
        f"\n{r0['device']}, {r0['dtype']}, torch {r0['torch']}, {r0['threads']} thread(s); "
        f"{r0['sentences']} sentences a request; untrained weights, real shapes\n"
    )
    print("| concurrency | row | Tok/Out | kept tokens/s | cost vs plain | decode s | embed s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['concurrency']} | {r['row']} | {r['tok_per_out']:.1f} | "
            f"{r['tokens_per_s']:.1f} | {r.get('cost_vs_plain', 1.0):.1f}x | "
            f"{r.get('decode_s', r['seconds']):.2f} | {r.get('embed_s', 0.0):.2f} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--make-shapes", action="store_true", help="record the shapes (needs the models)"
    )
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--concurrency", default="1,16,64")
    ap.add_argument("--candidates", default="4,16,64")
    ap.add_argument("--sentences", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (CPU replay)")
    ap.add_argument("--out", default=None, help="JSONL: one line per row")
    args = ap.parse_args()
    if args.make_shapes:
        make_shapes()
        return
    torch.set_num_threads(args.threads)
    args.concurrency = [int(x) for x in args.concurrency.split(",")]
    args.candidates = [int(x) for x in args.candidates.split(",") if x.strip()]
    rows = replay(args)
    _report(rows)


if __name__ == "__main__":
    main()
