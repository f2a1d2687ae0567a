"""Candidate sampling with a local transformers causal LM.

The shared prefix is prefilled once (and kept between calls for a step's later rounds,
:class:`samark.sampling.batch_decoder.PrefixCache`) and shared by the batch; each row is
decoded with temperature + nucleus sampling (transformers' own logits warpers) until the
project's segmenter confirms a complete first sentence, and finished rows leave the batch.
Several requests' draws can decode in one batch (``sample_many``): each keeps its own
prefix, settings, token layer and random stream, and the model runs once per token for
all of them. The token-level rows write their texts in the same decoding loop
(``write_many``, :mod:`samark.sampling.token_writing`): one sampling path for every row.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase

from samark.models import DEFAULT_GENERATOR, resolve_device, resolve_generator
from samark.sampling import shared_prefix
from samark.sampling.base import (
    BatchEngine,
    Candidate,
    CandidateBatch,
    EngineAbilities,
    LogitsBias,
    SampleRequest,
    SamplingParams,
)
from samark.sampling.batch_decoder import PREFIX_CACHE_BYTES, BatchDecoder, PrefixCache
from samark.sampling.engines import register_engine
from samark.sampling.token_writing import WriteRequest, Writing, Written
from samark.segment import first_sentence, segmenter_due

_TOP_K_FAST = 256


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
    out = torch.empty(probs.shape[0], dtype=torch.long, device=probs.device)
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


def row_bias(
    layer: LogitsBias | None,
    prefix: list[int],
    rows: list[list[int]],
    width: int,
    device: torch.device | str = "cpu",
) -> torch.Tensor | None:
    """The token layer's bias for each live row (its context: the prefix, then its own
    tokens) on ``device``, or None without a layer."""
    if layer is None:
        return None
    h = layer.context
    if h == 0:  # a bias without context (``r[-0:]`` would be the whole row)
        contexts: list[list[int]] = [[] for _ in rows]
    else:
        contexts = [(prefix[-h:] + r)[-h:] if len(r) < h else r[-h:] for r in rows]
    on_device = getattr(layer, "bias_on", None)
    if on_device is not None and torch.device(device).type != "cpu":
        # the token layer's hash on the GPU: rows x vocabulary, too much for the CPU a step
        bias: torch.Tensor = on_device(contexts, width, device)
        return bias
    return torch.from_numpy(layer.bias(contexts, width)).to(device)


def left_pad(rows: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows left-padded to one width: (input_ids, attention_mask)."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, width - len(r) :] = torch.tensor(r)
        mask[i, width - len(r) :] = 1
    return ids, mask


class _RowGroup(Protocol):
    """The rows of one request while a batch decodes: a candidate draw (``_Draw``) or a
    written text (:class:`~samark.sampling.token_writing.Writing`)."""

    ids: list[int]  # the prefix's token ids
    rows: list[int]  # the live rows (a row owner's own indices)

    @property
    def n(self) -> int: ...

    @property
    def max_new_tokens(self) -> int: ...

    def advance(self, step: int, logits: torch.Tensor) -> tuple[list[int], torch.Tensor]: ...


@dataclass
class _Draw:
    """One candidate draw's rows while a batch decodes."""

    request: SampleRequest
    ids: list[int]
    generator: torch.Generator
    engine: TransformersEngine
    rows: list[int] = field(init=False)  # the candidate index of each live row
    tokens: list[list[int]] = field(init=False)
    texts: list[str | None] = field(init=False)
    hinted: list[bool] = field(init=False)  # a row has sampled a sentence_end_chars()
    sampled: int = 0

    def __post_init__(self) -> None:
        n = self.request.n
        self.rows = list(range(n))
        self.tokens = [[] for _ in range(n)]
        self.texts = [None] * n
        self.hinted = [False] * n

    @property
    def n(self) -> int:
        return self.request.n

    @property
    def max_new_tokens(self) -> int:
        return self.request.params.max_sentence_tokens

    def advance(self, step: int, logits: torch.Tensor) -> tuple[list[int], torch.Tensor]:
        """Sample one token for each live row (``logits``: its rows' logits); end the rows
        that finished a sentence (or hit the draw's token cap, or were pruned). Returns the
        rows that decode on (indices into the live rows) and the tokens."""
        r, params, engine = self.request, self.request.params, self.engine
        bias = row_bias(
            r.token_layer,
            self.ids,
            [self.tokens[c] for c in self.rows],
            logits.shape[-1],
            logits.device,
        )
        nxt = sample_top_p(logits, params.temperature, params.top_p, self.generator, bias)
        self.sampled += len(self.rows)
        keep: list[int] = []
        last = step == params.max_sentence_tokens - 1
        picked = nxt.tolist()  # one read from the device, not one per row
        for b, cand in enumerate(self.rows):
            tok = int(picked[b])
            if tok in engine.eos_ids:
                self.texts[cand] = first_sentence(engine.decode(self.tokens[cand]), final=True)
                continue
            self.tokens[cand].append(tok)
            piece = str(engine.tokenizer.decode([tok]))  # special tokens as their text
            due, self.hinted[cand] = segmenter_due(piece, self.hinted[cand])
            if due or last:
                done = first_sentence(engine.decode(self.tokens[cand]), final=last)
                if done is not None or last:
                    self.texts[cand] = done
                    continue
            keep.append(b)
        prune = r.prune
        if prune is not None and step + 1 == prune.at and len(keep) > prune.keep:
            partial = [engine.decode(self.tokens[self.rows[b]]) for b in keep]
            best = np.argsort(-np.asarray(prune.score(partial)), kind="stable")
            keep = sorted(keep[i] for i in best[: prune.keep])
        self.rows = [self.rows[b] for b in keep]
        return keep, nxt

    def result(self, seconds: float) -> CandidateBatch:
        return CandidateBatch(
            tuple(Candidate(self.texts[i], len(self.tokens[i])) for i in range(self.n)),
            self.sampled,
            len(self.ids),
            seconds,
        )


class TransformersEngine(BatchEngine):
    """Samples candidates from a transformers causal LM (a preset name or local folder).

    ``device`` is where the model runs (default: :func:`samark.models.resolve_device`, a
    GPU when torch sees one); ``dtype`` its weights' type (default float32). Seeded draws
    repeat on the same device and dtype; another device draws from its own random stream.
    """

    tokenizer: PreTrainedTokenizerBase

    def __init__(
        self,
        model: str = DEFAULT_GENERATOR,
        *,
        threads: int | None = None,
        share_prefix: bool = True,
        device: str | torch.device | None = None,
        dtype: torch.dtype = torch.float32,
        prefix_cache_bytes: int = PREFIX_CACHE_BYTES,
    ) -> None:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        self.name, self.path = resolve_generator(model)
        self.share_prefix = share_prefix
        self.device = torch.device(resolve_device(device))
        if threads:
            torch.set_num_threads(threads)
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        self.model = AutoModelForCausalLM.from_pretrained(self.path, dtype=dtype)
        self.model.to(self.device)  # type: ignore[arg-type]
        self.model.eval()
        cfg = self.model.config
        self.max_context = int(getattr(cfg, "max_position_embeddings", 2048) or 2048)
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        #: held by every use of ``model``: decoding switches the model's attention
        #: implementation (shared_prefix.decoding), so threads that share an engine take
        #: turns (a BatchingEngine batches their draws instead)
        self.model_lock = threading.RLock()
        #: prefilled prefixes kept between calls (0 bytes: none): a step drawn in rounds
        #: prefills its context once (:mod:`samark.sampling.batch_decoder`)
        self.prefixes = PrefixCache(prefix_cache_bytes) if prefix_cache_bytes > 0 else None

    def __repr__(self) -> str:
        return f"TransformersEngine(model={self.name!r}, device={str(self.device)!r})"

    def encode_prefix(self, prefix: str, reserve: int) -> list[int]:
        """Token ids of ``prefix``, truncated from the left to leave ``reserve`` positions."""
        ids = self.tokenizer(prefix, add_special_tokens=True)["input_ids"]
        limit = max(1, self.max_context - reserve)
        return ids[-limit:]

    #: a token watermark and SAMark's steering (any ``LogitsBias``) on every candidate
    #: row, and row pruning
    abilities = EngineAbilities(token_layer=True, steering=True, prune=True, logits_processors=True)

    @torch.inference_mode()
    def sample_many(self, requests: Sequence[SampleRequest]) -> list[CandidateBatch]:
        """Several draws in one batch, each as :meth:`sample` would make it: its own prefix,
        settings, token layer, pruning and random stream. Seeded, a draw's candidates are
        those it gets alone unless the larger batch's float rounding (logits within about
        1e-5) flips one of its draws, which changes the rest of that draw. Where the
        model cannot use shared-prefix attention at these lengths, the draws run one after
        another. Each batch's ``seconds`` is its decoding time: in one batch, the whole
        batch's."""
        if not requests:
            return []
        with self.model_lock:
            return self._sample_many(requests)

    def _sample_many(self, requests: Sequence[SampleRequest]) -> list[CandidateBatch]:
        draws = [
            _Draw(
                r,
                self.encode_prefix(r.prefix, r.params.max_sentence_tokens),
                torch.Generator(device=self.device).manual_seed(
                    r.seed if r.seed is not None else int(torch.randint(0, 2**62, (1,)).item())
                ),
                self,
            )
            for r in requests
        ]
        timing = self._run_groups(draws)
        return [d.result(seconds) for d, (seconds, _) in zip(draws, timing, strict=True)]

    @torch.inference_mode()
    def write_many(self, requests: Sequence[WriteRequest]) -> list[Written]:
        """Write one text per request, the requests decoding in one batch (each with its own
        prefix, processors and random stream: seeded, a text is the one it gets alone
        unless the batch's float rounding flips a draw, as in :meth:`sample_many`). Each
        text's ``seconds`` is an even share of its batch's decoding time."""
        if not requests:
            return []
        with self.model_lock:
            writings = [
                Writing(r, self.encode_prefix(r.prefix, r.max_new_tokens), self.decode)
                for r in requests
            ]
            timing = self._run_groups(writings)
        return [w.result(s / size) for w, (s, size) in zip(writings, timing, strict=True)]

    def _run_groups(self, groups: Sequence[_RowGroup]) -> list[tuple[float, int]]:
        """Decode ``groups`` in one batch where their prefixes can share it, else one after
        another; returns, per group, its batch's decoding time and how many groups shared
        that batch."""
        longest = max(g.max_new_tokens for g in groups)
        if len(groups) > 1 and not (
            self.share_prefix
            and all(shared_prefix.supports(self.model, len(g.ids) + longest) for g in groups)
        ):  # these prefixes cannot share one batch here: one after another
            return [(self._decode_batch([g]), 1) for g in groups]
        return [(self._decode_batch(list(groups)), len(groups))] * len(groups)

    def _decode_batch(self, groups: list[_RowGroup]) -> float:
        """Decode ``groups`` in one batch (one group: the single-prefix decoder, which falls
        back to the expanded cache where shared-prefix attention is not exact); returns the
        decoding time."""
        start = time.perf_counter()
        longest = max(g.max_new_tokens for g in groups)
        if len(groups) == 1:
            g = groups[0]
            decoder = self.decoder(g.ids, g.n, longest)
        else:
            rows = [g.n for g in groups]
            decoder = BatchDecoder.for_prefixes(
                self.model, [g.ids for g in groups], rows, longest, cached=self.prefixes
            )
        logits = decoder.logits
        for step in range(longest):
            keep: list[int] = []
            picked: list[torch.Tensor] = []
            offset = 0
            for g in groups:
                live = len(g.rows)
                if not live:
                    continue
                kept, nxt = g.advance(step, logits[offset : offset + live])
                nxt = nxt.to(logits.device)  # a written row samples on the CPU
                keep.extend(offset + b for b in kept)
                picked.append(nxt[kept] if len(kept) < live else nxt)
                offset += live
            if not keep:
                break
            if len(keep) < offset:
                decoder.keep(keep)
            logits = decoder.step(picked[0] if len(picked) == 1 else torch.cat(picked))
        return time.perf_counter() - start

    def decoder(self, ids: list[int], rows: int, max_new_tokens: int) -> BatchDecoder:
        """Prefill ``ids`` once and get ready to decode ``rows`` continuations of it."""
        return BatchDecoder(
            self.model,
            ids,
            rows,
            max_new_tokens,
            share_prefix=self.share_prefix,
            prefixes=self.prefixes,
        )

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
        with self.model_lock:
            return self._sample_tokens(prefix, n, params, steps, seed, token_layer)

    def _sample_tokens(
        self,
        prefix: str,
        n: int,
        params: SamplingParams,
        steps: int,
        seed: int,
        token_layer: LogitsBias | None,
    ) -> torch.Tensor:
        gen = torch.Generator(device=self.device).manual_seed(seed)
        ids = self.encode_prefix(prefix, steps)
        decoder = self.decoder(ids, n, steps)
        logits = decoder.logits
        out = torch.empty((n, steps), dtype=torch.long, device=self.device)
        for step in range(steps):
            rows = out[:, :step].tolist()
            bias = row_bias(token_layer, ids, rows, logits.shape[-1], self.device)
            out[:, step] = sample_top_p(logits, params.temperature, params.top_p, gen, bias)
            if step < steps - 1:
                logits = decoder.step(out[:, step])
        return out.cpu()

    @property
    def pad_id(self) -> int:
        """The pad token, or EOS for models without one (padding is masked anyway)."""
        pad = self.tokenizer.pad_token_id
        return int(pad) if pad is not None else min(self.eos_ids, default=0)

    def decode(self, ids: Sequence[int]) -> str:
        """The text of token ids (special tokens skipped)."""
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))


@register_engine("transformers")
@functools.lru_cache(maxsize=2)
def load_transformers_engine(model: str = DEFAULT_GENERATOR) -> TransformersEngine:
    """The process-wide engine for ``model`` (loaded on first use)."""
    return TransformersEngine(model)
