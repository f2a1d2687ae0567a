"""Token stealing at scale (issue 36): 10, 100 and 1,000 marked texts a key, fresh keys.

The attacker of the `token-stealing` attack (its estimator, ``StolenPreferences``,
unchanged) learns from ``n`` marked texts of one key against unmarked texts it wrote with
the same public model, then continues prompts with that model biased toward what it
learned; the key's detector judges the forgeries. Each repetition is a fresh key, and
each key's marked texts are written for it, so the cells at n = 1,000 need 1,000 marked
texts a key and scheme: a GPU's work. Three steps, the middle one on the GPU:

    python benchmarks/studies/stealing_at_scale.py prepare experiments/runs/stealing-at-scale
    python benchmarks/studies/stealing_at_scale.py write experiments/runs/stealing-at-scale \
        --gguf SmolLM2-135M-Instruct.Q4_1.gguf --out DIR          # on the GPU
    python benchmarks/studies/stealing_at_scale.py detect experiments/runs/stealing-at-scale DIR

``prepare`` writes the plan (keys, prompts, settings) and each key's UPV network (trained
here, on one CPU thread, as the detector trains it); ``write`` writes every key's marked
texts, the attacker's unmarked texts and the forgeries; ``detect`` runs samark's own
detectors here, on the CPU, and writes the cells.

The keys are research keys, a function of their index alone (sha256 of
``samark/stealing-at-scale/<i>``), so anyone can rebuild the detectors: not secrets.

On the GPU the texts are written by a batched writer of this file, not by samark's
engine (which decodes row by row on the CPU), at the engine's settings and in its order:
special tokens suppressed, temperature, top-p, then the watermark. The watermarks are
the schemes' own: SynthID's processor as transformers builds it; Unigram's green mask;
KGW's green lists from transformers' own processor built on the CPU (its random stream is
the CPU's, as the detector's is), looked up per previous token; UPV's network and
threshold, applied to each row's top-k at once. ``write`` checks each against the
scheme's own CPU processor before it starts and refuses a scheme that differs.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

SCHEMES = ("kgw", "synthid", "unigram", "upv", "layered-token")
NS = (0, 10, 100, 1000)  # n = 0: the control, the forger's model unbiased
ALPHA = 0.01


def _secret(index: int) -> bytes:
    return hashlib.sha256(f"samark/stealing-at-scale/{index}".encode()).digest()


def research_key(index: int) -> Any:
    """Repetition ``index``'s key: public (a function of the index), for research only."""
    from samark.keys import EmbedderIdentity, WatermarkKey

    return WatermarkKey(_secret(index), EmbedderIdentity("none", "token-schemes-only"))


class LayeredTokenRow:
    """The layered mark's token layer under repetition ``index``'s key, alone: what a
    layered text's tokens carry (every candidate SAMark draws is biased by it, so the
    chosen one is too), written without SAMark's sentence selection, which moves
    meanings, not token statistics. Its detection is the layer's own p-value."""

    def __init__(self, index: int, generator: str | None = None) -> None:
        from samark.models import (
            DEFAULT_GENERATOR,
            generator_tokenizer,
            generator_vocab_size,
            resolve_generator,
        )
        from samark.schemes.samark.layered import token_layer_of

        path = str(resolve_generator(generator or DEFAULT_GENERATOR)[1])
        self.index = index
        self.layer = token_layer_of(research_key(index), generator_vocab_size(path))
        self.tokenizer = generator_tokenizer(path)

    def detect(self, text: str) -> Any:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return self.layer.score([int(i) for i in ids])

    def layered(self) -> Any:
        """The whole layered mark whose token layer this is: the same secret in a key made
        for SAMark's embedder (pivots avoiding the paper run's reference directions), with
        the layered row's defaults; checked to hold the same token layer."""
        import numpy as np

        from samark.embed import load_embedder
        from samark.keys import WatermarkKey
        from samark.keys.samark_material import PivotDraw
        from samark.schemes import create_scheme
        from samark.schemes.base import SharedResources

        embedder = load_embedder("all-mpnet-base-v2")
        key = WatermarkKey(
            _secret(self.index),
            embedder.identity,
            PivotDraw.avoiding(embedder.reference_directions(("news", "wiki"))),
        )
        shared = SharedResources("smollm2-135m-instruct", embedder)
        scheme = create_scheme("samark-layered", key=key, shared=shared)
        context = [1, 2, 3, 4]
        if not np.array_equal(
            scheme.token_layer.green_mask(context), self.layer.green_mask(context)
        ):
            raise SystemExit("the layered scheme's token layer is not this one")
        return scheme


def _scheme(name: str, index: int, generator: str | None = None) -> Any:
    from samark.schemes import create_scheme

    if name == "layered-token":
        return LayeredTokenRow(index, generator)

    kw: dict[str, Any] = {} if generator is None else {"generator": generator}
    return create_scheme(name, key=research_key(index), **kw)


# -- prepare (CPU) ----------------------------------------------------------------------
def prepare(args: argparse.Namespace) -> None:
    """The plan: marked-text prompts (CNN/DailyMail prompts no earlier cell used, then
    Wikipedia leads' first two sentences), the forger's 40 prompts (those of the earlier
    stealing cells), settings; and each key's UPV network and threshold."""
    import torch

    from samark.datasets import load_dataset, prompt_examples
    from samark.segment import split_sentences

    cnn = prompt_examples(
        load_dataset("cnn_dailymail"), prompt_sentences=3, sentences=12, count=10_000
    )
    forger = [e.prompt for e in cnn[40:80]]  # the run used 0-39; earlier forgeries 40-79
    pool = [e.prompt for e in cnn[80:]]
    for doc in load_dataset("wikipedia_leads"):
        if len(pool) >= args.marked:
            break
        sentences = split_sentences(doc.text)
        if len(sentences) >= 3:  # a prompt, and more of the lead it did not give
            pool.append(" ".join(sentences[:2]))
    args.run.mkdir(parents=True, exist_ok=True)
    plan = {
        "keys": args.keys,
        "schemes": list(SCHEMES),
        "ns": list(NS),
        "marked_prompts": pool[: args.marked],
        "forger_prompts": forger,
        "sentences": args.sentences,
        "tokens_per_sentence": 48,
        "temperature": 0.7,
        "top_p": 0.95,
        "estimator": {"context": 1, "delta": 4.0, "cap": 2.0, "min_count": 2},
    }
    (args.run / "plan.json").write_text(json.dumps(plan, indent=1) + "\n", encoding="utf-8")
    upv = {}
    for i in range(args.keys):
        start = time.perf_counter()
        scheme = _scheme("upv", i)
        net = scheme.network  # trains it and sets its threshold, as detection does
        upv[i] = {"state": net.state_dict(), "tau": scheme.threshold}
        print(f"key {i}: UPV network {time.perf_counter() - start:.0f} s", flush=True)
    torch.save(upv, args.run / "upv.pt")


# -- write (GPU) ------------------------------------------------------------------------
class Writer:
    """Batched nucleus sampling on one device: special tokens suppressed, temperature,
    top-p, then a watermark processor ``(ids, scores) -> scores`` over the whole batch."""

    def __init__(self, folder: str, device: str, batch: int, plan: dict[str, Any]) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, TopPLogitsWarper

        self.torch, self.device, self.batch = torch, device, batch
        self.tok = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        self.model = model.to(device).eval()  # type: ignore[arg-type]
        eos = model.generation_config.eos_token_id
        eos = eos if isinstance(eos, list) else [] if eos is None else [eos]
        self.suppress = sorted({int(i) for i in self.tok.all_special_ids} | set(eos))
        self.pad = int(self.tok.pad_token_id if self.tok.pad_token_id is not None else eos[0])
        self.top_p = TopPLogitsWarper(plan["top_p"])
        self.temperature = float(plan["temperature"])
        self.sentences = int(plan["sentences"])
        self.max_new = self.sentences * int(plan["tokens_per_sentence"])

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.tok(t, add_special_tokens=False)["input_ids"] for t in texts]

    def write(
        self,
        prompts: Sequence[str],
        seed: int,
        processor: Callable[[int, int], Any] | None = None,
        batch: int | None = None,
    ) -> list[str]:
        """Texts continuing ``prompts``; ``processor(start, rows)`` gives the watermark of
        the batch of rows ``start`` to ``start + rows`` (None: none)."""
        out: list[str] = []
        size = batch or self.batch
        for start in range(0, len(prompts), size):
            chunk = list(prompts[start : start + size])
            proc = processor(start, len(chunk)) if processor is not None else None
            out += self._batch(chunk, seed + start, proc)
        return out

    def _batch(self, prompts: list[str], seed: int, proc: Any) -> list[str]:
        from samark.segment import split_sentences, whole_sentences

        torch = self.torch
        with torch.inference_mode():
            rows = [self.tok(p, add_special_tokens=True)["input_ids"] for p in prompts]
            width = max(len(r) for r in rows)
            ids = torch.full((len(rows), width), self.pad, dtype=torch.long)
            mask = torch.zeros((len(rows), width), dtype=torch.long)
            for i, r in enumerate(rows):  # left padding
                ids[i, width - len(r) :] = torch.tensor(r)
                mask[i, width - len(r) :] = 1
            ids, mask = ids.to(self.device), mask.to(self.device)
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1)
            past, logits = out.past_key_values, out.logits[:, -1, :]
            gen = torch.Generator(device=self.device).manual_seed(seed)
            seqs, new = ids, []
            done = np.zeros(len(rows), dtype=bool)
            for step in range(self.max_new):
                s = logits.float()
                s[:, self.suppress] = -float("inf")
                s = self.top_p(seqs, s / self.temperature)
                if proc is not None:
                    s = proc(seqs, s)
                nxt = torch.multinomial(torch.softmax(s, -1), 1, generator=gen)
                new.append(nxt)
                seqs = torch.cat([seqs, nxt], 1)
                if (step + 1) % 32 == 0 and step >= 64:  # every row past its sentences: stop
                    open_rows = np.flatnonzero(~done)
                    written = torch.cat(new, 1)[torch.from_numpy(open_rows).to(self.device)]
                    texts = self.tok.batch_decode(written, skip_special_tokens=True)
                    for r, t in zip(open_rows, texts, strict=True):
                        done[r] = len(split_sentences(t)) > self.sentences
                    if done.all():
                        break
                mask = torch.cat([mask, torch.ones_like(nxt)], 1)
                pos = pos[:, -1:] + 1
                out = self.model(
                    input_ids=nxt, attention_mask=mask, position_ids=pos, past_key_values=past
                )
                past, logits = out.past_key_values, out.logits[:, -1, :]
            texts = self.tok.batch_decode(torch.cat(new, 1), skip_special_tokens=True)
        return [" ".join(whole_sentences(t, self.sentences)) for t in texts]


class KGWTable:
    """KGW's green lists from transformers' own processor, built on the CPU (the CPU's
    random stream, the detector's), each previous token's list computed once and kept on
    the device: the processor's work, for a whole batch at one lookup."""

    def __init__(self, scheme: Any, vocab: int, device: str) -> None:
        import torch

        self.torch = torch
        self.cpu = scheme.watermarking_config().construct_processor(vocab, "cpu")
        self.delta = float(self.cpu.bias)
        self.table = torch.zeros((vocab, vocab), dtype=torch.bool, device=device)
        self.known = np.zeros(vocab, dtype=bool)

    def fill(self, prev: Sequence[int]) -> None:
        torch = self.torch
        for t in {int(x) for x in prev}:
            if not self.known[t]:
                green = self.cpu._get_greenlist_ids(torch.tensor([t]))
                self.table[t, green.to(self.table.device)] = True
                self.known[t] = True

    def green(self, prev: Any, tokens: Any) -> Any:
        self.fill(prev.tolist())
        return self.table[prev, tokens]

    def __call__(self, ids: Any, scores: Any) -> Any:
        prev = ids[:, -1]
        self.fill(prev.tolist())
        return scores + self.delta * self.table[prev].to(scores.dtype)


class UPVTopK:
    """UPV's processor (``UPVBias``) for a whole batch at once: the key's network on each
    row's top-k (previous token, candidate) pairs, ``delta`` added to the green ones."""

    def __init__(self, net: Any, tau: float, top_k: int, delta: float, device: str) -> None:
        # a copy on the device: the scheme keeps the CPU one for its own processor
        self.net = copy.deepcopy(net).to(device)
        self.tau, self.top_k, self.delta = tau, top_k, delta

    def green(self, prev: Any, tokens: Any) -> Any:
        import torch

        with torch.no_grad():
            return self.net(torch.stack([prev, tokens], 1)) > self.tau

    def __call__(self, ids: Any, scores: Any) -> Any:
        import torch

        k = min(self.top_k, scores.shape[-1])
        top = torch.topk(scores, k, dim=-1).indices  # (B, k)
        prev = ids[:, -1:].expand(-1, k)
        windows = torch.stack([prev, top], -1).reshape(-1, 2)
        with torch.no_grad():
            green = (self.net(windows) > self.tau).reshape(top.shape)
        bias = torch.zeros_like(scores)
        bias.scatter_(1, top, green.to(scores.dtype) * self.delta)
        return scores + bias  # -inf stays -inf: a row with fewer than k finite is as UPVBias


def _processor_factory(
    name: str, scheme: Any, vocab: int, device: str, upv: dict[str, Any]
) -> tuple[Callable[[int, int], Any], Any]:
    """(a factory of the scheme's batch processor, its green test for precision or None)."""
    import torch

    if name == "kgw":
        table = KGWTable(scheme, vocab, device)
        return (lambda _s, _r: table), table.green
    if name == "layered-token":
        layer, h = scheme.layer, scheme.layer.config.context

        def layered(ids: Any, scores: Any) -> Any:
            bias = layer.bias([row[-h:] for row in ids.tolist()], scores.shape[-1])
            return scores + torch.from_numpy(bias).to(scores.device)

        return (lambda _s, _r: layered), None
    if name == "unigram":
        mask = scheme.green_mask(vocab).to(device)
        bias = mask.to(torch.float32) * scheme.config.delta
        return (lambda _s, _r: lambda _ids, scores: scores + bias), (
            lambda _prev, tokens: mask[tokens]
        )
    if name == "synthid":
        config = scheme.watermarking_config()

        def synthid(_s: int, _r: int) -> Any:
            # built on the CPU, then moved: its sampling table is drawn from a generator of
            # the device it is built on, and the detector's is the CPU's
            proc = config.construct_processor(vocab, torch.device("cpu"))
            proc.keys = proc.keys.to(device)
            proc.sampling_table = proc.sampling_table.to(device)
            proc.device = torch.device(device)
            return proc

        return synthid, None
    if name == "upv":
        net = scheme.load_network(upv["state"], float(upv["tau"]))  # trained by prepare
        proc = UPVTopK(net, scheme.threshold, scheme.config.top_k, scheme.config.delta, device)
        return (lambda _s, _r: proc), proc.green
    raise SystemExit(f"no batch processor for {name}")


def _check(name: str, scheme: Any, make: Callable[[int, int], Any], writer: Writer) -> str:
    """The batch processor against the scheme's own CPU processor on real contexts."""
    import torch

    if name == "layered-token":  # the processor is the layer's own bias, called as is
        return f"{name}: the layer's own bias"

    prompts = ["The minister said on Monday that", "In 1998 the river", "Scientists found"]
    rows = writer.encode(prompts)
    width = min(len(r) for r in rows)
    ids = torch.tensor([r[-width:] for r in rows], dtype=torch.long)
    scores = torch.randn((len(rows), scheme.lm.model.config.vocab_size)) * 3
    scores = writer.top_p(ids, scores)
    mine = make(0, len(rows))(ids.to(writer.device), scores.to(writer.device)).cpu()
    theirs = scheme.logits_processor()(ids, scores.clone())
    same_inf = torch.equal(torch.isinf(mine), torch.isinf(theirs))
    fin = torch.isfinite(theirs)
    diff = float((mine[fin] - theirs[fin]).abs().max())
    return f"{name}: same -inf {same_inf}, max |diff| {diff:.2e}" + (
        "" if same_inf and diff < 1e-4 else "  REFUSED"
    )


class RowStolenBias:
    """Each row's own stolen preferences (None: unbiased), ``delta`` times their scores."""

    def __init__(self, prefs: Sequence[Any], delta: float, vocab: int, device: str) -> None:
        import torch

        self.torch, self.prefs, self.delta = torch, list(prefs), delta
        base = np.zeros((len(prefs), vocab), dtype=np.float32)
        for i, p in enumerate(prefs):
            if p is not None:
                base[i] = p.context_free[:vocab]
        self.base = torch.from_numpy(base).to(device)

    def __call__(self, ids: Any, scores: Any) -> Any:
        torch = self.torch
        bias = self.base.clone()
        prev = ids[:, -1].tolist()
        rows: list[int] = []
        cols: list[np.ndarray] = []
        vals: list[np.ndarray] = []
        for r, p in enumerate(self.prefs):
            hit = None if p is None else p.by_context.get((prev[r],))
            if hit is not None:
                rows += [r] * len(hit[0])
                cols.append(hit[0])
                vals.append(hit[1])
        if rows:
            r_t = torch.tensor(rows, device=bias.device)
            c_t = torch.from_numpy(np.concatenate(cols)).to(bias.device)
            bias[r_t, c_t] = torch.from_numpy(np.concatenate(vals)).to(bias.device)
        return scores + self.delta * bias[:, : scores.shape[-1]]


def _learn(marked: list[list[int]], base: list[list[int]], vocab: int, est: dict) -> Any:
    """The attacker's estimator on these marked texts, at the plan's settings."""
    from samark.evaluation.attacks.token_stealing import StolenPreferences

    return StolenPreferences(
        marked, base, vocab, context=est["context"], cap=est["cap"], min_count=est["min_count"]
    )


def _stolen(jobs: list[Any], delta: float, vocab: int, device: str) -> Callable[[int, int], Any]:
    """The forgery batches' processor factory: each row biased by its own job's preferences."""
    return lambda s, r: RowStolenBias([j[-1] for j in jobs[s : s + r]], delta, vocab, device)


def _precision(prefs: Any, green: Any, device: str, context_free: bool) -> dict[str, float]:
    """The share of learned (previous token, token) pairs green under the key (a truth the
    forger never sees), and of learned context-free tokens where the list has no context
    (Unigram)."""
    import torch

    pairs = [(c[0], int(t)) for c, (ids, _) in prefs.by_context.items() for t in ids]
    tokens = np.flatnonzero(prefs.context_free > 0)
    out: dict[str, float] = {"pairs": len(pairs), "tokens": len(tokens)}
    if context_free and len(tokens):
        tok = torch.from_numpy(tokens).to(device)
        out["tokens_green"] = float(green(torch.zeros_like(tok), tok).float().mean())
    if pairs:
        prev = torch.tensor([p for p, _ in pairs], device=device)
        tok = torch.tensor([t for _, t in pairs], device=device)
        out["pairs_green"] = float(green(prev, tok).float().mean())
    return out


def write(args: argparse.Namespace) -> None:
    import torch

    from samark.models import gguf_to_folder

    started = time.perf_counter()
    plan = json.loads((args.run / "plan.json").read_text(encoding="utf-8"))
    upv_nets = torch.load(args.run / "upv.pt", weights_only=False)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.gguf is not None:
        folder = str(gguf_to_folder(args.gguf))
    else:  # the installed generator (a CPU run)
        from samark.models import resolve_generator

        folder = str(resolve_generator(args.generator)[1])
    writer = Writer(folder, args.device, args.batch, plan)
    vocab = writer.model.config.vocab_size
    summary: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if args.device == "cuda" else args.device,
        "torch": torch.__version__,
        "checks": [],
        "precision": [],
        "seconds": {},
    }

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:5.0f} s] {message}", flush=True)

    def save() -> None:
        (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")

    prompts = plan["marked_prompts"][: args.marked]
    t0 = time.perf_counter()
    if args.base is not None:  # an earlier write's unmarked texts
        with gzip.open(args.base, "rt", encoding="utf-8") as f:
            base = [json.loads(x)["text"] for x in f]
    else:
        base = writer.write(prompts, seed=10_000_000)
    summary["seconds"]["base"] = time.perf_counter() - t0
    log(f"{len(base)} unmarked texts")
    base_ids = writer.encode(base)
    with gzip.open(args.out / "base.jsonl.gz", "wt", encoding="utf-8") as f:
        for i, t in enumerate(base):
            f.write(json.dumps({"i": i, "text": t}) + "\n")

    est = plan["estimator"]
    forger = plan["forger_prompts"]
    per_key = len(forger) // plan["keys"]
    last = 0.0  # the last key's seconds: a key starts only if one more fits
    for k in range(args.first_key, min(plan["keys"], args.keys or plan["keys"])):
        if time.perf_counter() - started + last > args.deadline:
            log(f"deadline: keys {k}.. not written")
            break
        key_start = time.perf_counter()
        jobs: list[tuple[int, str, int, int, Any]] = []  # key, scheme, n, prompt, prefs
        for name in args.schemes:
            scheme = _scheme(name, k, folder)
            make, green = _processor_factory(name, scheme, vocab, args.device, upv_nets[k])
            verdict = _check(name, scheme, make, writer)
            summary["checks"].append(verdict)
            log(verdict)
            if verdict.endswith("REFUSED"):
                continue
            t0 = time.perf_counter()
            # SynthID's processor holds (rows, vocabulary, depth) g-values: smaller batches
            size = min(args.batch, 250) if name == "synthid" else args.batch
            marked = writer.write(prompts, seed=1_000_000 * (k + 1), processor=make, batch=size)
            summary["seconds"][f"{name}/{k}"] = time.perf_counter() - t0
            log(f"key {k} {name}: {len(marked)} marked, {time.perf_counter() - t0:.0f} s")
            with gzip.open(args.out / "marked.jsonl.gz", "at", encoding="utf-8") as f:
                for i, t in enumerate(marked):
                    f.write(json.dumps({"scheme": name, "key": k, "i": i, "text": t}) + "\n")
            marked_ids = writer.encode(marked)
            slots = range(k * per_key, (k + 1) * per_key)
            for n in plan["ns"]:
                if n > len(marked):
                    continue
                prefs = None
                if n:
                    prefs = _learn(marked_ids[:n], base_ids, vocab, est)
                    if green is not None:
                        row = _precision(prefs, green, args.device, name == "unigram")
                        summary["precision"].append({"scheme": name, "key": k, "n": n, **row})
                jobs += [(k, name, n, i, prefs) for i in slots]
            save()
        t0 = time.perf_counter()
        texts = writer.write(
            [forger[i] for _, _, _, i, _ in jobs],
            seed=100_000 * (k + 1),
            processor=_stolen(jobs, est["delta"], vocab, args.device),
        )
        summary["seconds"][f"forgeries/{k}"] = time.perf_counter() - t0
        with (args.out / "forgeries.jsonl").open("a", encoding="utf-8") as f:
            for (_, name, n, i, _), t in zip(jobs, texts, strict=True):
                rec = {"scheme": name, "key": k, "n": n, "prompt": i, "text": t}
                f.write(json.dumps(rec) + "\n")
        last = time.perf_counter() - key_start
        log(f"key {k}: {len(jobs)} forgeries; the key took {last:.0f} s")
        save()
    summary["seconds"]["total"] = time.perf_counter() - started
    save()
    log("done")


def forge(args: argparse.Namespace) -> None:
    """More forgeries per key from the marked and unmarked texts a ``write`` left (no new
    marked text, so any device): each key's learner, as in ``write``, continues the forger
    prompts that key has not yet used, seeds of their own; appended to forgeries.jsonl."""
    from samark.models import resolve_generator

    plan = json.loads((args.run / "plan.json").read_text(encoding="utf-8"))
    est, forger = plan["estimator"], plan["forger_prompts"]
    writer = Writer(str(resolve_generator(args.generator)[1]), args.device, args.batch, plan)
    vocab = writer.model.config.vocab_size
    with gzip.open(args.written / "base.jsonl.gz", "rt", encoding="utf-8") as f:
        base_ids = writer.encode([json.loads(x)["text"] for x in f])
    with gzip.open(args.written / "marked.jsonl.gz", "rt", encoding="utf-8") as f:
        marked: dict[tuple[str, int], list[str]] = {}
        for r in map(json.loads, f):
            marked.setdefault((r["scheme"], r["key"]), []).append(r["text"])
    done = [json.loads(x) for x in (args.written / "forgeries.jsonl").open(encoding="utf-8")]
    started = time.perf_counter()
    for (name, k), texts in sorted(marked.items()):
        if name not in args.schemes:
            continue
        used = {r["prompt"] for r in done if r["scheme"] == name and r["key"] == k}
        slots = [i for i in range(len(forger)) if i not in used][: args.per_key]
        ids = writer.encode(texts)
        learned = {n: _learn(ids[:n], base_ids, vocab, est) for n in args.ns}  # once per n
        jobs = [(k, name, n, i, learned[n]) for n in args.ns for i in slots]
        out = writer.write(
            [forger[i] for *_, i, _ in jobs],
            seed=200_000 * (k + 1) + 10_000 * SCHEMES.index(name),
            processor=_stolen(jobs, est["delta"], vocab, args.device),
        )
        with (args.written / "forgeries.jsonl").open("a", encoding="utf-8") as f:
            for (_, _, n, i, _), t in zip(jobs, out, strict=True):
                rec = {"scheme": name, "key": k, "n": n, "prompt": i, "text": t, "where": "forge"}
                f.write(json.dumps(rec) + "\n")
        print(
            f"{name}/{k}: {len(jobs)} forgeries, {time.perf_counter() - started:.0f} s", flush=True
        )


# -- detect (CPU) -----------------------------------------------------------------------
def detect(args: argparse.Namespace) -> None:
    """samark's detectors on the forgeries and on the first ``--marked-check`` marked
    texts of every key and scheme (that the GPU's texts carry the mark)."""
    from samark.errors import SamarkError
    from samark.evaluation.text_metrics import distinct_2, four_gram_repeat

    forged = [json.loads(x) for x in (args.written / "forgeries.jsonl").open(encoding="utf-8")]
    with gzip.open(args.written / "marked.jsonl.gz", "rt", encoding="utf-8") as f:
        marked = [json.loads(x) for x in f]
    schemes: dict[tuple[str, int], Any] = {}

    def p_value(name: str, k: int, text: str) -> float:
        if (name, k) not in schemes:
            schemes[(name, k)] = _scheme(name, k)
        try:
            return float(schemes[(name, k)].detect(text).p_value)
        except SamarkError as e:  # too short to score: counted as missed
            print(f"  {name}/{k}: {type(e).__name__}: {e}", file=sys.stderr)
            return 1.0

    whole: dict[int, Any] = {}

    def layered_p(k: int, text: str) -> dict[str, float]:
        from samark.schemes.samark.layered import combine_p_values

        if k not in whole:
            whole[k] = _scheme("layered-token", k).layered()
        try:
            d = whole[k].detect(text)
        except SamarkError:
            return {"p_fisher": 1.0, "p_both": 1.0}
        both = combine_p_values(d.details["p_semantic"], d.details["p_token"], method="both")
        return {"p_fisher": float(d.p_value), "p_both": float(both)}

    out = args.run / "detections.jsonl"
    with out.open("w", encoding="utf-8") as f:
        for r in marked:
            if r["i"] < args.marked_check:
                row = {"kind": "marked", "scheme": r["scheme"], "key": r["key"], "i": r["i"]}
                row["p"] = p_value(r["scheme"], r["key"], r["text"])
                f.write(json.dumps(row) + "\n")
        print(f"{len(schemes)} detectors; marked texts checked", flush=True)
        for r in forged:
            row = {k: r[k] for k in ("scheme", "key", "n", "prompt")}
            row |= {
                "kind": "forgery",
                "p": p_value(r["scheme"], r["key"], r["text"]),
                "distinct2": distinct_2(r["text"]) if r["text"] else 0.0,
                "rep4": four_gram_repeat(r["text"]) if r["text"] else 0.0,
                "words": len(r["text"].split()),
            }
            if r["scheme"] == "layered-token":  # the whole layered mark on them too
                row |= layered_p(r["key"], r["text"])
            f.write(json.dumps(row) + "\n")
    print(f"wrote {out}")
    table(argparse.Namespace(run=args.run, written=args.written))


def _pct(ps: list[float]) -> str:
    """A cell: percent of p-values below alpha, the count and the median."""
    hit = sum(p < ALPHA for p in ps)
    return f"{100 * hit / len(ps):.1f} ({hit}/{len(ps)}; median p {np.median(ps):.2g})"


def table(args: argparse.Namespace) -> None:
    """The cells (markdown, to stdout and ``table.md``) and the plot."""
    rows = [json.loads(x) for x in (args.run / "detections.jsonl").open(encoding="utf-8")]
    summary = json.loads((args.written / "summary.json").read_text(encoding="utf-8"))
    lines = [
        "| scheme | marked texts detected | control (n = 0) | n = 10 | n = 100 | n = 1,000 |"
        " Distinct-2 at n = 0 / 1,000 | learned pairs green at n = 10 / 100 / 1,000 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    cells: dict[str, dict[int, list[float]]] = {}
    for name in SCHEMES:
        mk = [r["p"] for r in rows if r["kind"] == "marked" and r["scheme"] == name]
        fg = [r for r in rows if r["kind"] == "forgery" and r["scheme"] == name]
        if not fg:
            continue
        by_n = {n: [r for r in fg if r["n"] == n] for n in NS}
        cells[name] = {n: [r["p"] for r in v] for n, v in by_n.items() if v}

        keys = len({r["key"] for r in fg})
        d2 = [np.mean([r["distinct2"] for r in by_n[n]]) for n in (0, 1000) if by_n[n]]
        prec = []
        for n in (10, 100, 1000):
            got = [
                p["pairs_green"]
                for p in summary["precision"]
                if p["scheme"] == name and p["n"] == n and "pairs_green" in p
            ]
            prec.append(f"{100 * np.mean(got):.0f}%" if got else "–")
        lines.append(
            f"| {name} ({keys} keys) | {_pct(mk) if mk else '–'} | "
            + " | ".join(_pct(cells[name][n]) if n in cells[name] else "–" for n in NS)
            + f" | {' / '.join(f'{x:.2f}' for x in d2)} | {' / '.join(prec)} |"
        )
    whole = [r for r in rows if r["kind"] == "forgery" and "p_fisher" in r]
    for how, label in (("p_fisher", "layered, Fisher"), ("p_both", "layered, both")):
        if whole:
            by = {n: [r[how] for r in whole if r["n"] == n] for n in NS}
            lines.append(
                f"| {label}, on the layered-token forgeries | – | "
                + " | ".join(_pct(by[n]) if by[n] else "–" for n in NS)
                + " | – | – |"
            )
    text = "\n".join(lines) + "\n"
    print(text)
    (args.run / "table.md").write_text(text, encoding="utf-8")
    _plot(cells, args.run / "stealing_at_scale.png")


def _plot(cells: dict[str, dict[int, list[float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy.stats import beta

    fig, ax = plt.subplots(figsize=(7, 4.2))
    labels = {
        "kgw": "KGW",
        "synthid": "SynthID",
        "unigram": "Unigram",
        "upv": "UPV",
        "layered-token": "layered token layer",
    }
    for j, (name, by_n) in enumerate(cells.items()):
        xs, ys, lo, hi = [], [], [], []
        for n in NS:
            if n not in by_n:
                continue
            ps = by_n[n]
            k, m = sum(p < ALPHA for p in ps), len(ps)
            xs.append(max(n, 3) * (1 + 0.06 * (j - 1.5)))  # n = 0 drawn at 3
            ys.append(100 * k / m)
            lo.append(100 * (beta.ppf(0.025, k, m - k + 1) if k else 0.0))
            hi.append(100 * (beta.ppf(0.975, k + 1, m - k) if k < m else 1.0))
        ys_a = np.array(ys)
        ax.errorbar(
            xs,
            ys,
            yerr=[ys_a - np.array(lo), np.array(hi) - ys_a],
            marker="o",
            capsize=3,
            label=f"{labels.get(name, name)} ({len(by_n[max(by_n)])} forgeries a cell)",
        )
    ax.set_xscale("log")
    ax.set_xticks([3, 10, 100, 1000], ["none\n(control)", "10", "100", "1,000"])
    ax.set_xlabel("marked texts the attacker learned from (one key)")
    ax.set_ylabel("forgeries detected at p < 0.01 (%)")
    ax.set_ylim(-3, 103)
    ax.axhline(1, color="grey", lw=0.8, ls=":")
    ax.set_title("Token stealing: forgeries the key's detector accepts (95% CI)")
    ax.legend(frameon=False)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    print(f"wrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("run", type=Path)
    p.add_argument("--keys", type=int, default=4)
    p.add_argument("--marked", type=int, default=1000)
    p.add_argument("--sentences", type=int, default=6)
    w = sub.add_parser("write")
    w.add_argument("run", type=Path)
    w.add_argument("--gguf", type=Path, default=None, help="the generator as a GGUF file")
    w.add_argument("--generator", default="smollm2-135m-instruct", help="else this one")
    w.add_argument("--out", type=Path, required=True)
    w.add_argument("--device", default="cuda")
    w.add_argument("--batch", type=int, default=500)
    w.add_argument("--marked", type=int, default=1000, help="marked texts a key (the first)")
    w.add_argument("--schemes", nargs="+", default=list(SCHEMES), choices=SCHEMES)
    w.add_argument("--keys", type=int, default=0, help="up to this key (0: all)")
    w.add_argument("--first-key", type=int, default=0)
    w.add_argument("--base", type=Path, help="an earlier write's base.jsonl.gz")
    w.add_argument("--deadline", type=float, default=1e9, help="start no key after (s)")
    d = sub.add_parser("detect")
    d.add_argument("run", type=Path)
    d.add_argument("written", type=Path)
    d.add_argument("--marked-check", type=int, default=25)
    g = sub.add_parser("forge")
    g.add_argument("run", type=Path)
    g.add_argument("written", type=Path)
    g.add_argument("--generator", default="smollm2-135m-instruct")
    g.add_argument("--device", default="cpu")
    g.add_argument("--batch", type=int, default=60)
    g.add_argument("--per-key", type=int, default=30)
    g.add_argument("--ns", type=int, nargs="+", default=[10, 100, 1000])
    g.add_argument("--schemes", nargs="+", default=list(SCHEMES), choices=SCHEMES)
    t = sub.add_parser("table")
    t.add_argument("run", type=Path)
    t.add_argument("written", type=Path)
    args = ap.parse_args()
    {"prepare": prepare, "write": write, "forge": forge, "detect": detect, "table": table}[
        args.step
    ](args)


if __name__ == "__main__":
    main()
