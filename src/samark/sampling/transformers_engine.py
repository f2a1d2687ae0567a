"""Candidate sampling with a local transformers causal LM.

The shared prefix is prefilled once and its KV cache expanded to the batch; each row is
decoded with temperature + nucleus sampling (transformers' own logits warpers) until the
project's segmenter confirms a complete first sentence, and finished rows leave the batch.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

from samark.models import DEFAULT_GENERATOR, resolve_generator
from samark.sampling import shared_prefix
from samark.sampling.base import Candidate, CandidateBatch, SamplingParams
from samark.segment import first_sentence

_SENTENCE_HINTS = (".", "!", "?", "…", "\n")
_TOP_K_FAST = 256


class LogitsBias(Protocol):
    """A token-level watermark applied inside the engine (e.g.
    :class:`samark.token_layer.GreenListLayer`): an additive logit bias per row that
    depends on the row's last ``context`` tokens only."""

    @property
    def context(self) -> int: ...

    def bias(self, contexts: Sequence[Sequence[int]], width: int) -> np.ndarray: ...


class RowPruner(Protocol):
    """Early stopping of candidate rows: once every live row has decoded ``at`` tokens,
    only the ``keep`` live rows whose partial text scores best decode on (SAMark's
    pruned budget, ``SAMarkConfig.prune_at``). Rows that completed a sentence earlier stay
    candidates; pruned rows end as incomplete candidates."""

    @property
    def at(self) -> int: ...

    @property
    def keep(self) -> int: ...

    def score(self, partial_texts: list[str]) -> np.ndarray: ...


def sample_top_p(
    logits: torch.Tensor,
    temperature: float,
    top_p: float,
    generator: torch.Generator,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """One token per row from softmax(logits / temperature) restricted to the nucleus.

    The nucleus is the rule of transformers' ``TopPLogitsWarper``: keep a token when the
    probability mass ranked strictly above it is below ``top_p`` (so at least one token).
    Rows whose nucleus fits in the top 256 tokens skip the full-vocabulary sort; the others
    take it. Same distribution either way.

    ``bias`` (rows, vocab), a token watermark's additive logit bias, is applied after the
    nucleus is cut, as transformers orders its watermark processors: the nucleus is the
    model's, and within it token v is drawn with probability proportional to
    ``p_v * exp(bias_v)``. Without it the draws are exactly those of the unbiased sampler.
    """
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    vals, idx = torch.topk(probs, min(_TOP_K_FAST, probs.shape[-1]), dim=-1)
    fits = vals.sum(dim=-1) >= top_p
    if bool(fits.all()):
        return _nucleus_pick(vals, idx, top_p, generator, bias)
    out = torch.empty(probs.shape[0], dtype=torch.long)
    if bool(fits.any()):
        out[fits] = _nucleus_pick(
            vals[fits], idx[fits], top_p, generator, None if bias is None else bias[fits]
        )
    rest = ~fits
    full_vals, full_idx = torch.sort(probs[rest], dim=-1, descending=True)
    out[rest] = _nucleus_pick(
        full_vals, full_idx, top_p, generator, None if bias is None else bias[rest]
    )
    return out


def _nucleus_pick(
    vals: torch.Tensor,
    idx: torch.Tensor,
    top_p: float,
    generator: torch.Generator,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sample from descending-sorted probabilities ``vals`` (token ids ``idx``) within
    the nucleus, reweighted by ``exp(bias)`` (indexed by token id) when given."""
    above = torch.cumsum(vals, dim=-1) - vals
    kept = torch.where(above < top_p, vals, torch.zeros_like(vals))
    if bias is not None:
        kept = kept * torch.exp(bias.gather(-1, idx))
    pick = torch.multinomial(kept, 1, generator=generator)
    return idx.gather(-1, pick).squeeze(-1)


def _row_bias(
    layer: LogitsBias | None, prefix: list[int], rows: list[list[int]], width: int
) -> torch.Tensor | None:
    """The token layer's bias for each live row (its context: the prefix, then its own
    tokens), or None without a layer."""
    if layer is None:
        return None
    h = layer.context
    if h == 0:  # a bias without context (``r[-0:]`` would be the whole row)
        return torch.from_numpy(layer.bias([[] for _ in rows], width))
    contexts = [(prefix[-h:] + r)[-h:] if len(r) < h else r[-h:] for r in rows]
    return torch.from_numpy(layer.bias(contexts, width))


def left_pad(rows: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows left-padded to one width: (input_ids, attention_mask)."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, width - len(r) :] = torch.tensor(r)
        mask[i, width - len(r) :] = 1
    return ids, mask


def cache_argument(model: Any) -> str:
    """The name of the KV cache in the model's forward and output: ``cache`` in recent
    transformers, ``past_key_values`` before (deprecated in 5.x, removed in 5.40)."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


class BatchDecoder:
    """Decodes ``rows`` continuations of one prefilled prefix, one token per row per step.

    The prefix is prefilled once; decoding attends to it through shared-prefix attention
    (one copy of its KV for all rows, see :mod:`samark.sampling.shared_prefix`) where that is
    exact for the model, else through transformers' cache expanded to the batch.
    """

    def __init__(
        self,
        model: Any,
        ids: list[int],
        rows: int,
        max_new_tokens: int,
        *,
        share_prefix: bool = True,
    ) -> None:
        self.model = model
        self.cache_name = cache_argument(model)
        cache = DynamicCache(config=model.config)
        out = model(torch.tensor([ids]), use_cache=True, **{self.cache_name: cache})
        #: next-token logits of every live row, shape (rows, vocab)
        self.logits: torch.Tensor = out.logits[:, -1, :].expand(rows, -1)
        self.shared = share_prefix and shared_prefix.supports(model, len(ids) + max_new_tokens)
        if self.shared:
            self.state = shared_prefix.SharedPrefixState(out[self.cache_name], rows, max_new_tokens)
        else:
            self.cache = out[self.cache_name]
            self.cache.batch_repeat_interleave(rows)

    def keep(self, rows: list[int]) -> None:
        """Keep only these live rows (indices into the current batch, ascending)."""
        index = torch.tensor(rows)
        if self.shared:
            self.state.keep_rows(index)
        else:
            self.cache.batch_select_indices(index)

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed one token per live row; returns the next logits, shape (rows, vocab)."""
        if self.shared:
            with shared_prefix.decoding(self.model):
                out = self.model(
                    tokens[:, None],
                    position_ids=torch.tensor([[self.state.position]]),
                    use_cache=False,
                    **{shared_prefix.STATE_KWARG: self.state},
                )
            self.state.advance()
        else:
            out = self.model(tokens[:, None], use_cache=True, **{self.cache_name: self.cache})
            self.cache = out[self.cache_name]
        self.logits = out.logits[:, -1, :]
        return self.logits


class TransformersSampler:
    """Samples candidates from a transformers causal LM (a preset name or local folder)."""

    def __init__(
        self,
        model: str = DEFAULT_GENERATOR,
        *,
        threads: int | None = None,
        share_prefix: bool = True,
    ) -> None:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        self.name, self.path = resolve_generator(model)
        self.share_prefix = share_prefix
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

    #: this engine applies a token watermark (``token_layer``) on every candidate row
    supports_token_layer = True
    #: and any additive logit bias of the ``LogitsBias`` protocol (SAMark's steering)
    supports_steering = True

    @torch.inference_mode()
    def sample(
        self,
        prefix: str,
        n: int,
        params: SamplingParams,
        *,
        seed: int | None = None,
        token_layer: LogitsBias | None = None,
        prune: RowPruner | None = None,
    ) -> CandidateBatch:
        """``n`` candidate next sentences of ``prefix``; with ``token_layer``, every row
        is sampled under that token watermark; with ``prune``, only its best ``keep`` live
        rows decode past its ``at`` tokens."""
        if n < 1:
            raise ValueError("n must be >= 1")
        start = time.perf_counter()
        gen = torch.Generator().manual_seed(
            seed if seed is not None else int(torch.randint(0, 2**62, (1,)).item())
        )
        ids = self.encode_prefix(prefix, params.max_sentence_tokens)
        decoder = self.decoder(ids, n, params.max_sentence_tokens)
        logits = decoder.logits
        rows = list(range(n))  # candidate index of each batch row
        tokens: list[list[int]] = [[] for _ in range(n)]
        texts: list[str | None] = [None] * n
        sampled = 0
        for step in range(params.max_sentence_tokens):
            bias = _row_bias(token_layer, ids, [tokens[c] for c in rows], logits.shape[-1])
            nxt = sample_top_p(logits, params.temperature, params.top_p, gen, bias)
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
            if prune is not None and step + 1 == prune.at and len(keep) > prune.keep:
                partial = [self._decode(tokens[rows[b]]) for b in keep]
                best = np.argsort(-np.asarray(prune.score(partial)), kind="stable")
                keep = sorted(keep[i] for i in best[: prune.keep])
            if not keep:
                break
            if len(keep) < len(rows):
                decoder.keep(keep)
                nxt = nxt[keep]
                rows = [rows[b] for b in keep]
            logits = decoder.step(nxt)
        candidates = tuple(Candidate(texts[i], len(tokens[i])) for i in range(n))
        return CandidateBatch(candidates, sampled, len(ids), time.perf_counter() - start)

    def decoder(self, ids: list[int], rows: int, max_new_tokens: int) -> BatchDecoder:
        """Prefill ``ids`` once and get ready to decode ``rows`` continuations of it."""
        return BatchDecoder(self.model, ids, rows, max_new_tokens, share_prefix=self.share_prefix)

    @torch.inference_mode()
    def sample_tokens(
        self,
        prefix: str,
        n: int,
        params: SamplingParams,
        steps: int,
        *,
        seed: int = 0,
        token_layer: LogitsBias | None = None,
    ) -> torch.Tensor:
        """``steps`` raw tokens for each of ``n`` rows (no sentence stopping, EOS included):
        the same prefill, cache sharing and sampling as :meth:`sample`, for testing its law."""
        gen = torch.Generator().manual_seed(seed)
        ids = self.encode_prefix(prefix, steps)
        decoder = self.decoder(ids, n, steps)
        logits = decoder.logits
        out = torch.empty((n, steps), dtype=torch.long)
        for step in range(steps):
            rows = out[:, :step].tolist()
            bias = _row_bias(token_layer, ids, rows, logits.shape[-1])
            out[:, step] = sample_top_p(logits, params.temperature, params.top_p, gen, bias)
            if step < steps - 1:
                logits = decoder.step(out[:, step])
        return out

    @property
    def pad_id(self) -> int:
        """The pad token, or EOS for models without one (padding is masked anyway)."""
        pad = self.tokenizer.pad_token_id
        return int(pad) if pad is not None else min(self.eos_ids, default=0)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))


@functools.lru_cache(maxsize=2)
def load_transformers_sampler(model: str = DEFAULT_GENERATOR) -> TransformersSampler:
    """The process-wide sampler for ``model`` (loaded on first use)."""
    return TransformersSampler(model)
