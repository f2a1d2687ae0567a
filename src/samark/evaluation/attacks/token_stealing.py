"""Token stealing: learn which next tokens a key favours from its marked texts, then write
new text with a public model biased toward them (Jovanovic et al. 2024, "Watermark stealing
in large language models", its frequency-ratio estimator, simplified).

The attacker holds ``n`` marked texts (bought from the operator's endpoint) and unmarked
text of the same public model (it writes that itself, or any public text). It counts, over
the generator's tokens,

- context-free: how much more often each token occurs in marked than in unmarked text,
  ``r(t) = p_marked(t) / p_base(t)``;
- per context (the previous ``context`` tokens, 1 for KGW's default): the same ratio of the
  next token's frequency given that context, the base smoothed toward its context-free
  frequency (contexts are sparse in a few thousand tokens).

A ratio ``r >= 1`` scores ``min(r, cap) / cap``, a lower one 0 (the paper's clipped score);
a token seen fewer than ``min_count`` times in marked text scores 0. While writing, each
step's logits get ``delta`` times the context's score where the context has evidence for
that token, else ``delta`` times its context-free score. The forger writes with the
operator's sampling settings (temperature, top-p, sentences), the bias applied after the
nucleus cut, as the schemes' own processors are.

A forgery attack (``kind = "forgery"``): each input text is a prompt the forger continues,
and a detection of what it writes is the attacker's success. It never sees the key.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from samark.errors import SamarkError
from samark.evaluation.attacks.base import Attack, register_attack
from samark.models import DEFAULT_GENERATOR
from samark.sampling.base import TextWriter


def read_texts(source: str | Sequence[str], field: str = "text") -> list[str]:
    """Texts given as a list, or as a JSONL file's ``field`` (one record a line)."""
    if isinstance(source, str):
        path = Path(source)
        if not path.is_file():
            raise SamarkError(f"{source}: no such JSONL file of texts")
        lines = path.read_text(encoding="utf-8").splitlines()
        return [str(json.loads(line)[field]) for line in lines if line.strip()]
    return [str(t) for t in source]


class StolenPreferences:
    """The learned preferences: a context-free score per token and, per context, scores
    of the tokens that followed it in marked text more often than in unmarked text."""

    def __init__(
        self,
        marked: Sequence[Sequence[int]],
        base: Sequence[Sequence[int]],
        vocab: int,
        *,
        context: int = 1,
        cap: float = 2.0,
        min_count: int = 2,
        smoothing: float = 5.0,
    ) -> None:
        if context < 0 or cap <= 1 or min_count < 1:
            raise SamarkError("context must be >= 0, cap > 1 and min_count >= 1")
        self.vocab, self.context, self.cap = vocab, context, cap
        mw = Counter(t for ids in marked for t in ids)
        mb = Counter(t for ids in base for t in ids)
        n_w, n_b = max(1, sum(mw.values())), sum(mb.values())
        self.marked_tokens = sum(mw.values())
        p_base = np.full(vocab, 1.0 / (n_b + vocab))  # add-one smoothing
        for t, c in mb.items():
            p_base[t] = (c + 1) / (n_b + vocab)
        self.context_free = np.zeros(vocab, dtype=np.float32)
        for t, c in mw.items():
            if c >= min_count:
                self.context_free[t] = self._score((c / n_w) / p_base[t])
        self.by_context: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
        if context == 0:
            return

        def grams(texts: Sequence[Sequence[int]]) -> Counter[tuple[int, ...]]:
            return Counter(
                tuple(ids[i - context : i + 1]) for ids in texts for i in range(context, len(ids))
            )

        gw, gb = grams(marked), grams(base)
        ctx_w = Counter(g[:-1] for g in gw.elements())
        ctx_b = Counter(g[:-1] for g in gb.elements())
        found: dict[tuple[int, ...], list[tuple[int, float]]] = {}
        for g, c in gw.items():
            if c < min_count:
                continue
            ctx, t = g[:-1], g[-1]
            p_w = c / ctx_w[ctx]
            p_b = (gb.get(g, 0) + smoothing * p_base[t]) / (ctx_b.get(ctx, 0) + smoothing)
            found.setdefault(ctx, []).append((t, self._score(p_w / p_b)))
        for ctx, pairs in found.items():
            ids = np.array([t for t, _ in pairs], dtype=np.int64)
            self.by_context[ctx] = (ids, np.array([s for _, s in pairs], dtype=np.float32))

    def _score(self, ratio: float) -> float:
        return 0.0 if ratio < 1 else min(ratio, self.cap) / self.cap

    def scores(self, previous: Sequence[int]) -> np.ndarray:
        """Each token's score after ``previous`` (its last ``context`` tokens count)."""
        out = self.context_free
        if self.context and len(previous) >= self.context:
            hit = self.by_context.get(tuple(int(t) for t in previous[-self.context :]))
            if hit is not None:
                out = out.copy()
                out[hit[0]] = hit[1]
        return out


class StolenBias:
    """A logits processor (transformers' protocol): adds ``delta`` times the stolen scores
    of each row's context to its logits."""

    def __init__(self, stolen: StolenPreferences, delta: float) -> None:
        self.stolen, self.delta = stolen, delta

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        width = scores.shape[-1]
        rows = [
            self.stolen.scores(input_ids[r].tolist())[:width] for r in range(input_ids.shape[0])
        ]
        return scores + self.delta * torch.from_numpy(np.stack(rows)).to(scores.dtype)


@register_attack("token-stealing")
class TokenStealing(Attack):
    """Learn a token mark's preferences from ``marked`` texts against ``unmarked`` ones (lists
    or JSONL files with a ``text`` field; the first ``n`` marked texts if given), then
    continue each input text (a prompt) with the public ``generator`` biased toward them."""

    name = "token-stealing"
    summary = "forgery: learn a token mark from n marked texts, write new text biased to it"
    kind = "forgery"

    def __init__(
        self,
        marked: str | Sequence[str] = (),
        unmarked: str | Sequence[str] = (),
        *,
        n: int | None = None,
        generator: str = DEFAULT_GENERATOR,
        context: int = 1,
        delta: float = 4.0,
        cap: float = 2.0,
        min_count: int = 2,
        sentences: int = 12,
        tokens_per_sentence: int = 48,
        temperature: float = 0.7,
        top_p: float = 0.95,
    ) -> None:
        from samark.sampling.transformers_engine import load_transformers_engine
        from samark.schemes.lm_generate import vocab_size

        texts = read_texts(marked)
        if n is not None:
            if n < 0 or n > len(texts):
                raise SamarkError(f"n = {n}, but {len(texts)} marked texts were given")
            texts = texts[:n]
        base = read_texts(unmarked)
        if not base:
            raise SamarkError("token-stealing needs unmarked text of the model (unmarked=)")
        if delta < 0 or sentences < 1 or tokens_per_sentence < 1:
            raise SamarkError("delta must be >= 0, sentences and tokens_per_sentence >= 1")
        self.n = len(texts)
        self.lm = load_transformers_engine(generator)
        self.delta = float(delta)
        self.sentences, self.max_new_tokens = sentences, sentences * tokens_per_sentence
        self.temperature, self.top_p = temperature, top_p
        tok = self.lm.tokenizer
        encode = lambda t: tok(t, add_special_tokens=False)["input_ids"]  # noqa: E731
        self.stolen = StolenPreferences(
            [encode(t) for t in texts],
            [encode(t) for t in base],
            vocab_size(self.lm),
            context=context,
            cap=cap,
            min_count=min_count,
        )

    def rewrite(self, texts: list[str], seeds: list[int], human: list[str] | None) -> list[str]:
        from samark.sampling.token_writing import WriteRequest
        from samark.schemes.lm_generate import special_ids
        from samark.segment import whole_sentences

        suppress = tuple(sorted(special_ids(self.lm)))
        requests = [
            WriteRequest(
                prompt,
                self.max_new_tokens,
                temperature=self.temperature,
                top_p=self.top_p,
                seed=seed,
                watermark=cast(Any, StolenBias(self.stolen, self.delta)) if self.delta else None,
                suppress=suppress,
                sentences=self.sentences,
            )
            for prompt, seed in zip(texts, seeds, strict=True)
        ]
        writer: TextWriter[WriteRequest] = self.lm
        return [
            " ".join(whole_sentences(writer.decode(w.tokens), self.sentences))
            for w in writer.write_many(requests)
        ]
