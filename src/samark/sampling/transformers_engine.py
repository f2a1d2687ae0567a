"""Candidate sampling with a local transformers causal LM.

The shared prefix is prefilled once and its KV cache expanded to the batch; each row is
decoded with temperature + nucleus sampling (transformers' own logits warpers) until the
project's segmenter confirms a complete first sentence, and finished rows leave the batch.
"""

from __future__ import annotations

import functools
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

from samark.models import DEFAULT_GENERATOR, resolve_generator
from samark.sampling.base import Candidate, CandidateBatch, SamplingParams
from samark.segment import first_sentence

_SENTENCE_HINTS = (".", "!", "?", "…", "\n")
_TOP_K_FAST = 256


def sample_top_p(
    logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator
) -> torch.Tensor:
    """One token per row from softmax(logits / temperature) restricted to the nucleus.

    The nucleus is the rule of transformers' ``TopPLogitsWarper``: keep a token when the
    probability mass ranked strictly above it is below ``top_p`` (so at least one token).
    Rows whose nucleus fits in the top 256 tokens skip the full-vocabulary sort; the others
    take it. Same distribution either way.
    """
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    vals, idx = torch.topk(probs, min(_TOP_K_FAST, probs.shape[-1]), dim=-1)
    fits = vals.sum(dim=-1) >= top_p
    if bool(fits.all()):
        return _nucleus_pick(vals, idx, top_p, generator)
    out = torch.empty(probs.shape[0], dtype=torch.long)
    if bool(fits.any()):
        out[fits] = _nucleus_pick(vals[fits], idx[fits], top_p, generator)
    rest = ~fits
    full_vals, full_idx = torch.sort(probs[rest], dim=-1, descending=True)
    out[rest] = _nucleus_pick(full_vals, full_idx, top_p, generator)
    return out


def _nucleus_pick(
    vals: torch.Tensor, idx: torch.Tensor, top_p: float, generator: torch.Generator
) -> torch.Tensor:
    """Sample from descending-sorted probabilities ``vals`` (token ids ``idx``) within
    the nucleus."""
    above = torch.cumsum(vals, dim=-1) - vals
    kept = torch.where(above < top_p, vals, torch.zeros_like(vals))
    pick = torch.multinomial(kept, 1, generator=generator)
    return idx.gather(-1, pick).squeeze(-1)


class TransformersSampler:
    """Samples candidates from a transformers causal LM (a preset name or local folder)."""

    def __init__(self, model: str = DEFAULT_GENERATOR, *, threads: int | None = None) -> None:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        self.name, self.path = resolve_generator(model)
        if threads:
            torch.set_num_threads(threads)
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        self.model = AutoModelForCausalLM.from_pretrained(self.path, dtype=torch.float32)
        self.model.eval()
        cfg = self.model.config
        self.max_context = int(getattr(cfg, "max_position_embeddings", 2048) or 2048)
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])

    def __repr__(self) -> str:
        return f"TransformersSampler(model={self.name!r})"

    def encode_prefix(self, prefix: str, reserve: int) -> list[int]:
        """Token ids of ``prefix``, truncated from the left to leave ``reserve`` positions."""
        ids = self.tokenizer(prefix, add_special_tokens=True)["input_ids"]
        limit = max(1, self.max_context - reserve)
        return ids[-limit:]

    @torch.inference_mode()
    def sample(
        self, prefix: str, n: int, params: SamplingParams, *, seed: int | None = None
    ) -> CandidateBatch:
        if n < 1:
            raise ValueError("n must be >= 1")
        start = time.perf_counter()
        gen = torch.Generator().manual_seed(
            seed if seed is not None else int(torch.randint(0, 2**62, (1,)).item())
        )
        ids = self.encode_prefix(prefix, params.max_sentence_tokens)
        cache = DynamicCache(config=self.model.config)
        out = self.model(torch.tensor([ids]), past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        cache.batch_repeat_interleave(n)
        logits = out.logits[:, -1, :].expand(n, -1)

        rows = list(range(n))  # candidate index of each batch row
        tokens: list[list[int]] = [[] for _ in range(n)]
        texts: list[str | None] = [None] * n
        sampled = 0
        for step in range(params.max_sentence_tokens):
            nxt = sample_top_p(logits, params.temperature, params.top_p, gen)
            sampled += len(rows)
            keep: list[int] = []
            last = step == params.max_sentence_tokens - 1
            for b, cand in enumerate(rows):
                tok = int(nxt[b])
                if tok in self.eos_ids:
                    texts[cand] = first_sentence(self._decode(tokens[cand]), final=True)
                    continue
                tokens[cand].append(tok)
                piece = str(self.tokenizer.decode([tok]))
                if any(h in piece for h in _SENTENCE_HINTS) or last or piece[:1].isspace():
                    done = first_sentence(self._decode(tokens[cand]), final=last)
                    if done is not None or last:
                        texts[cand] = done
                        continue
                keep.append(b)
            if not keep:
                break
            if len(keep) < len(rows):
                cache.batch_select_indices(torch.tensor(keep))
                nxt = nxt[keep]
                rows = [rows[b] for b in keep]
            out = self.model(nxt[:, None], past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            logits = out.logits[:, -1, :]
        candidates = tuple(Candidate(texts[i], len(tokens[i])) for i in range(n))
        return CandidateBatch(candidates, sampled, len(ids), time.perf_counter() - start)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))


@functools.lru_cache(maxsize=2)
def load_transformers_sampler(model: str = DEFAULT_GENERATOR) -> TransformersSampler:
    """The process-wide sampler for ``model`` (loaded on first use)."""
    return TransformersSampler(model)
