"""Where SAMark's sampled tokens go, and what a cheaper selection would keep (issue 24).

``record`` runs SAMark (the paper's N = 64, fresh key per prompt) on the paper protocol's
prompts and writes one JSON line per step: every candidate row's decoded tokens, and for
each complete candidate its flag-signed cosines to the pivots, whether it passes the hard
filters, its diversity and novelty terms, and its flag-signed cosines after only its first
k tokens (the prefix decoded from the generator's own tokens, embedded like a sentence).
These records derive from throw-away keys; they are research records, not secrets.

``analyse`` answers, from those records alone:
  1. how many rows are still decoding after k tokens, and how many of them end matched;
  2. how well the projection after k tokens predicts the full sentence's (Pearson r per
     channel, and whether the sign already matches the flag: agreement with the final);
  3. how often the step's winner is among the first m rows;
  4. policies replayed on the same pools: the first m rows (a smaller N), and pruning at
     k tokens (keep the q rows whose partial score is best, decode only those to the end).
     For each: sampled tokens per kept token (Tok/Out), the pick's expected flag-signed
     cosine per channel (the "offset"; the softmax pick's expectation over the subset),
     its expected detection term mean_j tanh(30 r_j cos_j), and the share of steps with a
     match. The pools come from the N = 64 trajectory, so a cheaper policy is replayed in
     the context N = 64 wrote (its own text would drift less toward the key): an upper
     bound on what it keeps.

    python benchmarks/studies/budget.py record -o experiments/runs/budget/steps.jsonl --prompts 8
    python benchmarks/studies/budget.py analyse experiments/runs/budget/steps.jsonl
    python benchmarks/studies/budget.py quality experiments/runs/budget/steps.jsonl \
        experiments/runs/budget/steer-0.5.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from samark.schemes.samark.config import SAMarkConfig
from samark.schemes.samark.selection import softmax_weights, watermark_score

PREFIX_TOKENS = (2, 4, 6, 8, 12, 16)


def record(args: argparse.Namespace) -> None:
    import torch

    from samark.datasets import load_dataset, prompt_examples
    from samark.embed import load_embedder, new_key
    from samark.sampling.transformers_engine import load_transformers_engine
    from samark.schemes.samark import SAMark
    from samark.schemes.samark.selection import (
        ngram_overlap,
        semantic_similarity,
        vocabulary_novelty,
    )

    torch.set_num_threads(1)
    embedder = load_embedder("all-mpnet-base-v2")
    lm = load_transformers_engine("smollm2-135m-instruct")
    examples = prompt_examples(
        load_dataset("cnn_dailymail"), prompt_sentences=3, sentences=12, count=args.prompts
    )
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        done = {json.loads(line)["prompt"] for line in out.open()}

    class Recording:
        """The generator, remembering each batch's rows (decoded tokens, complete or not)."""

        name = lm.name
        tokenizer = lm.tokenizer
        abilities = lm.abilities

        def __init__(self) -> None:
            self.rows: list[tuple[int, bool]] = []

        def sample(self, prefix: str, n: int, params: Any, **kw: Any) -> Any:
            batch = lm.sample(prefix, n, params, **kw)
            self.rows += [(c.n_tokens, c.complete) for c in batch.candidates]
            return batch

        def count_tokens(self, text: str) -> int:
            return lm.count_tokens(text)

    def partial_texts(text: str) -> list[str]:
        ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
        return [str(lm.tokenizer.decode(ids[:k])) for k in PREFIX_TOKENS]

    class Recorded(SAMark):
        """SAMark, writing each step's pool down before it updates its state."""

        prompt = ""
        recording = Recording()
        lines: ClassVar[list[dict[str, Any]]] = []  # replaced per prompt

        def pick(self, state: Any, texts: list[str], pool: np.ndarray) -> Any:
            state.texts = list(texts)
            return super().pick(state, texts, pool)

        def chosen(self, state: Any, sentence: str, embedding: Any, pool: Any, pick: Any) -> Any:
            c = self.config
            texts = state.texts
            pivots, flags = self._pivots, state.flags
            signed = (pool @ pivots.T) * flags
            ngram_ok = [
                ngram_overlap(t, state.context_ngrams, c.selection.ngram_n)
                < c.selection.theta_ngram
                for t in texts
            ]
            rho = semantic_similarity(pool, state.history)
            parts = [partial_texts(t) for t in texts]
            flat = [s.strip() or "." for ps in parts for s in ps]
            part_emb = self.embed_unique(flat).reshape(len(texts), len(PREFIX_TOKENS), -1)
            part_signed = (part_emb @ pivots.T) * flags  # (m, k, c)
            self.lines.append(
                {
                    "prompt": self.prompt,
                    "step": len(state.history),
                    "rows": self.recording.rows,
                    "chosen": pick.index,
                    "kind": pick.kind,
                    "chosen_tokens": lm.count_tokens(sentence),
                    "sentence": sentence,
                    "signed": np.round(signed, 5).tolist(),
                    "hard_ok": [
                        bool(a and b)
                        for a, b in zip(ngram_ok, rho < c.selection.theta_sem, strict=True)
                    ],
                    "diversity": np.round(1 - rho, 5).tolist(),
                    "novelty": [round(vocabulary_novelty(t, state.vocabulary), 5) for t in texts],
                    "partial": np.round(part_signed, 5).tolist(),
                }
            )
            self.recording.rows = []
            return super().chosen(state, sentence, embedding, pool, pick)

    config = SAMarkConfig.of(
        candidates=args.candidates,
        max_new_sentences=args.sentences,
        steer=args.steer,
        prune_at=args.prune_at,
        prune_keep=args.prune_keep,
    )
    for p, ex in enumerate(examples):
        if ex.prompt in done:
            continue
        recording = Recording()
        scheme = Recorded(new_key(embedder), config=config, embedder=embedder, engine=recording)  # type: ignore[arg-type]
        scheme.prompt, scheme.recording, scheme.lines = ex.prompt, recording, []
        lines = scheme.lines
        start = time.perf_counter()
        scheme.generate(ex.prompt, seed=args.seed + p)
        with out.open("a") as f:
            for line in lines:
                line["prefix_tokens"] = list(PREFIX_TOKENS)
                f.write(json.dumps(line) + "\n")
        print(
            f"prompt {p + 1}/{len(examples)}: {len(lines)} steps, "
            f"{time.perf_counter() - start:.0f} s",
            flush=True,
        )


# ---------------------------------------------------------------- analysis

#: the selection's own parameters (SAMark's defaults, those the records were made with)
PAPER = SAMarkConfig()


def s_wm(signed: np.ndarray) -> np.ndarray:
    """The selection's watermark score of flag-signed cosines (m, c) (or (m, k, c))."""
    flat = signed.reshape(-1, signed.shape[-1])
    score = watermark_score(flat, np.ones(flat.shape[1]), PAPER.selection_kappa, True)
    return score.reshape(signed.shape[:-1])


def load(path: Path) -> list[dict[str, Any]]:
    steps = []
    for line in path.open():
        s = json.loads(line)
        rows = s["rows"]
        complete = [i for i, (_, ok) in enumerate(rows) if ok]
        s["row_of"] = np.array(complete)  # batch row of each complete candidate
        s["row_tokens"] = np.array([n for n, _ in rows])
        for name in ("signed", "diversity", "novelty", "partial", "hard_ok"):
            s[name] = np.array(s[name])
        steps.append(s)
    return steps


def pick_law(s: dict[str, Any], subset: np.ndarray) -> tuple[float, float, bool]:
    """The pick among the complete candidates ``subset``: expected offset (mean signed
    cosine per channel), expected detection term, and whether any matched."""
    if len(subset) == 0:
        return float("nan"), float("nan"), False
    signed = s["signed"][subset]
    matched = s["hard_ok"][subset] & np.all(signed > 0, axis=1)
    score = (
        s_wm(signed)
        + PAPER.selection.lambda_div * s["diversity"][subset]
        + PAPER.selection.lambda_nov * s["novelty"][subset]
    )
    offset = signed.mean(axis=1)
    term = np.tanh(PAPER.detection.kappa * signed).mean(axis=1)  # the detector's alignment
    if matched.any():
        q = softmax_weights(score[matched], PAPER.selection.epsilon)
        return float(q @ offset[matched]), float(q @ term[matched]), True
    pool = (
        np.flatnonzero(s["hard_ok"][subset])
        if s["hard_ok"][subset].any()
        else np.arange(len(subset))
    )
    best = pool[np.argmax(score[pool])]
    return float(offset[best]), float(term[best]), False


def replay(steps: list[dict[str, Any]], policy: Any) -> dict[str, float]:
    """Tok/Out, expected offset and term, and share matched of ``policy`` (step -> (complete
    candidate indices it decodes to the end, tokens it decodes)) over ``steps``."""
    tokens = kept = 0
    offsets, terms, matched = [], [], []
    for s in steps:
        subset, cost = policy(s)
        off, term, m = pick_law(s, subset)
        if np.isnan(off):
            continue
        tokens += cost
        kept += s["chosen_tokens"]
        offsets.append(off)
        terms.append(term)
        matched.append(m)
    return {
        "tok_out": tokens / kept,
        "offset": float(np.mean(offsets)),
        "term": float(np.mean(terms)),
        "matched": float(np.mean(matched)),
    }


def first_rows(m: int) -> Any:
    def policy(s: dict[str, Any]) -> tuple[np.ndarray, int]:
        return np.flatnonzero(s["row_of"] < m), int(s["row_tokens"][:m].sum())

    return policy


def pruned(n: int, k_index: int, keep: int, k: int) -> Any:
    """The first ``n`` rows decoded to ``k`` tokens; the ``keep`` complete-or-live rows
    whose partial score (mean tanh(kappa r_j cos_j) after k tokens) is best go on."""

    def policy(s: dict[str, Any]) -> tuple[np.ndarray, int]:
        rows = s["row_tokens"][:n]
        cands = np.flatnonzero(s["row_of"] < n)
        part = s["partial"][cands, k_index]  # (m, c)
        score = s_wm(part)  # the engine's PartialScore
        order = cands[np.argsort(-score)][:keep]
        # rows that end within k tokens cost what they cost; incomplete rows are pruned
        cost = int(np.minimum(rows, k).sum())
        longer = s["row_tokens"][s["row_of"][order]] - k
        cost += int(np.clip(longer, 0, None).sum())
        short = cands[s["row_tokens"][s["row_of"][cands]] <= k]  # finished by k: free
        return np.union1d(order, short), cost

    return policy


def rounds(chunk: int, tau: float, limit: int = 64) -> Any:
    """Rows in chunks of ``chunk``; stop once a candidate that passes the hard filters has
    every channel's flag-signed cosine >= ``tau`` (the adaptive budget's rule with a
    target offset instead of a saturation level), or after ``limit`` rows."""

    def policy(s: dict[str, Any]) -> tuple[np.ndarray, int]:
        strong = s["hard_ok"] & np.all(s["signed"] >= tau, axis=1)
        n = limit
        for end in range(chunk, limit + 1, chunk):
            if strong[s["row_of"] < end].any():
                n = end
                break
        return np.flatnonzero(s["row_of"] < n), int(s["row_tokens"][:n].sum())

    return policy


def analyse(args: argparse.Namespace) -> None:
    steps = load(Path(args.records))
    ks = steps[0]["prefix_tokens"]
    print(f"{len(steps)} steps from {len({s['prompt'] for s in steps})} prompts")
    lengths = np.concatenate([s["row_tokens"] for s in steps])
    chosen = np.array([s["chosen_tokens"] for s in steps])
    print(
        f"row tokens: mean {lengths.mean():.1f}, median {np.median(lengths):.0f}; "
        f"chosen sentence {chosen.mean():.1f}; complete rows "
        f"{np.mean([len(s['row_of']) / len(s['row_tokens']) for s in steps]):.1%}"
    )

    pool = np.array([s["signed"].mean() for s in steps])
    first = [s["signed"].mean() for s in steps if s["step"] == 0]
    match = np.mean([np.all(s["signed"] > 0, axis=1).mean() for s in steps])
    print(
        f"candidate pool, flag-signed cosine per channel: mean {pool.mean():+.4f} "
        f"(first steps {np.mean(first):+.4f}), sd within a step "
        f"{np.mean([s['signed'].std() for s in steps]):.4f}; share matching {match:.1%}"
    )

    print("\n1-2. After k tokens: rows still decoding, and how the partial projection predicts")
    print(
        f"{'k':>3} {'live':>6} {'live&matched':>13} {'r(cos_k,cos)':>13} "
        f"{'sign agrees':>12} {'winner rank':>12} {'winner in top 8':>16}"
    )
    for i, k in enumerate(ks):
        live = np.mean([(s["row_tokens"] > k).sum() for s in steps])
        live_m = np.mean(
            [
                (
                    (s["row_tokens"][s["row_of"]] > k)
                    & s["hard_ok"]
                    & np.all(s["signed"] > 0, axis=1)
                ).sum()
                for s in steps
            ]
        )
        part = np.concatenate([s["partial"][:, i].ravel() for s in steps])
        full = np.concatenate([s["signed"].ravel() for s in steps])
        r = np.corrcoef(part, full)[0, 1]
        agree = np.mean(np.sign(part) == np.sign(full))
        ranks, top = [], []
        for s in steps:
            score = s_wm(s["partial"][:, i])
            rank = int((score > score[s["chosen"]]).sum())
            ranks.append(rank / len(score))
            top.append(rank < 8)
        print(
            f"{k:>3} {live:6.1f} {live_m:13.1f} {r:13.3f} {agree:12.1%} "
            f"{np.mean(ranks):11.1%} {np.mean(top):16.1%}"
        )

    print("\n3. The winner among the first m rows")
    for m in (8, 16, 32, 48):
        share = np.mean([s["row_of"][s["chosen"]] < m for s in steps])
        print(f"  m = {m:>2}: {share:.1%} (m/64 = {m / 64:.1%})")

    print("\n4. Policies replayed on the same pools")
    print(f"{'policy':<34} {'Tok/Out':>8} {'offset':>8} {'term':>7} {'matched':>8}")
    rows: list[tuple[str, Any]] = [
        (f"first {m} rows (N = {m})", first_rows(m)) for m in (8, 12, 16, 24, 32, 48, 64)
    ]
    for tau in (0.02, 0.03, 0.04, 0.05, 0.06):
        rows.append((f"rounds of 8 to offset {tau:.2f}", rounds(8, tau)))
    for i, k in enumerate(ks):
        if k < 4 or k > 8:
            continue
        for n in (32, 64):
            for keep in (4, 8, 16):
                rows.append((f"N = {n}, prune at {k} tokens, keep {keep}", pruned(n, i, keep, k)))
    for name, policy in rows:
        r = replay(steps, policy)
        print(
            f"{name:<34} {r['tok_out']:8.1f} {r['offset']:+8.4f} {r['term']:7.3f} "
            f"{r['matched']:8.1%}"
        )


def quality(args: argparse.Namespace) -> None:
    """Each records file's texts (its prompts' chosen sentences joined): perplexity under
    gemma-3-270m given the prompt, paired by prompt across the files."""
    import torch

    from samark.evaluation.perplexity import Perplexity

    torch.set_num_threads(1)
    oracle = Perplexity("gemma-3-270m")
    texts: list[dict[str, str]] = []
    for path in args.records:
        by_prompt: dict[str, list[str]] = {}
        with Path(path).open() as f:
            for line in f:
                s = json.loads(line)
                by_prompt.setdefault(s["prompt"], []).append(s["sentence"].strip())
        texts.append({p: " ".join(v) for p, v in by_prompt.items()})
    common = sorted(set.intersection(*(set(t) for t in texts)))
    ppl = np.array([[oracle.perplexity(p, t[p]) for p in common] for t in texts])
    print(f"{len(common)} prompts in every file; perplexity under {oracle.name}")
    for path, row in zip(args.records, ppl, strict=True):
        print(f"  {path}: mean {row.mean():.2f}, median {np.median(row):.2f}")
    for path, row in zip(args.records[1:], ppl[1:], strict=True):
        d = np.log(row) - np.log(ppl[0])
        se = d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else float("nan")
        print(f"  {path} vs the first: mean log ratio {d.mean():+.3f} (paired se {se:.3f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("-o", "--output", required=True)
    rec.add_argument("--prompts", type=int, default=8)
    rec.add_argument("--sentences", type=int, default=6)
    rec.add_argument("--candidates", type=int, default=64)
    rec.add_argument("--seed", type=int, default=0)
    rec.add_argument("--steer", type=float, default=0.0, help="SAMarkConfig.steer")
    rec.add_argument("--prune-at", type=int, default=0, help="SAMarkConfig.prune_at")
    rec.add_argument("--prune-keep", type=int, default=4, help="SAMarkConfig.prune_keep")
    an = sub.add_parser("analyse")
    an.add_argument("records")
    qu = sub.add_parser("quality")
    qu.add_argument("records", nargs="+")
    args = ap.parse_args()
    {"record": record, "analyse": analyse, "quality": quality}[args.command](args)


if __name__ == "__main__":
    main()
