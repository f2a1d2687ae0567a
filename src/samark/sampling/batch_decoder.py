"""Decoding many rows from prefilled prefixes, and the prefixes' KV kept between calls.

:class:`BatchDecoder` prefills each prefix once and decodes its rows one token a step,
attending to the prefix through shared-prefix attention (:mod:`samark.sampling.shared_prefix`)
where that is exact for the model. :class:`PrefixCache` keeps a prefilled prefix (its KV
and last logits) between engine calls, so the rounds of one step that draw candidates in
chunks (SAMark's adaptive budget, a step's extra batch) prefill the request's context once
instead of once a round. A prefix is reused only when its token ids are the same, so a
reused prefill is the prefill itself, bit for bit: seeded draws do not change.
"""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict
from collections.abc import Sequence

import torch
from transformers import DynamicCache, PreTrainedModel

from samark.sampling import shared_prefix

#: the prefix cache's default budget: about 11,000 context tokens of SmolLM2-135M's KV
#: (46 KB a token), enough for every request of a loaded server's step
PREFIX_CACHE_BYTES = 512 * 2**20


class PrefixCache:
    """Prefilled prefixes by their token ids, least recently used first out, within
    ``max_bytes`` of KV. Entries are read, never written: decoding copies what it needs
    (shared-prefix attention reads the prefix's KV; the expanded-cache path is never
    served from here). Thread-safe; ``hits`` and ``misses`` count lookups."""

    def __init__(self, max_bytes: int = PREFIX_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[int, ...], tuple[DynamicCache, torch.Tensor, int]] = (
            OrderedDict()
        )
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        return self._bytes

    def get(self, ids: Sequence[int]) -> tuple[DynamicCache, torch.Tensor] | None:
        """The prefix's KV and last logits (1, vocab), or None."""
        key = tuple(ids)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[0], entry[1]

    def put(self, ids: Sequence[int], cache: DynamicCache, logits: torch.Tensor) -> None:
        size = _cache_bytes(cache) + logits.numel() * logits.element_size()
        if size > self.max_bytes:
            return
        key = tuple(ids)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[2]
            self._entries[key] = (cache, logits, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, _, freed) = self._entries.popitem(last=False)
                self._bytes -= freed

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


def _cache_bytes(cache: DynamicCache) -> int:
    total = 0
    for layer in cache.layers:
        for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if isinstance(t, torch.Tensor):
                total += t.numel() * t.element_size()
    return total


def cache_argument(model: PreTrainedModel) -> str:
    """The name of the KV cache in the model's forward and output: ``cache`` in recent
    transformers, ``past_key_values`` before (deprecated in 5.x, removed in 5.40)."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


class BatchDecoder:
    """Decodes ``rows`` continuations of one prefilled prefix, one token per row per step.

    The prefix is prefilled once; decoding attends to it through shared-prefix attention
    (one copy of its KV for all rows, see :mod:`samark.sampling.shared_prefix`) where that is
    exact for the model, else through transformers' cache expanded to the batch.
    :meth:`for_prefixes` decodes the rows of several prefixes in one batch.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        ids: list[int],
        rows: int,
        max_new_tokens: int,
        *,
        share_prefix: bool = True,
        prefixes: PrefixCache | None = None,
    ) -> None:
        self._prefill(model, [ids], [rows], max_new_tokens, share_prefix, prefixes)

    @classmethod
    def for_prefixes(
        cls,
        model: PreTrainedModel,
        prefixes: Sequence[list[int]],
        rows: Sequence[int],
        max_new_tokens: int,
        *,
        cached: PrefixCache | None = None,
    ) -> BatchDecoder:
        """``rows[g]`` continuations of ``prefixes[g]``, the groups in that order in the
        batch. Needs shared-prefix attention at every prefix's length
        (:func:`samark.sampling.shared_prefix.supports`). ``cached``: prefilled prefixes
        to reuse and keep."""
        decoder = cls.__new__(cls)
        decoder._prefill(model, prefixes, rows, max_new_tokens, True, cached)
        if not decoder.shared:
            raise ValueError("several prefixes decode together only with shared-prefix attention")
        return decoder

    def _prefill(
        self,
        model: PreTrainedModel,
        prefixes: Sequence[list[int]],
        rows: Sequence[int],
        max_new_tokens: int,
        share_prefix: bool,
        cached: PrefixCache | None = None,
    ) -> None:
        self.model = model
        self.cache_name = cache_argument(model)
        self.shared = share_prefix and all(
            shared_prefix.supports(model, len(ids) + max_new_tokens) for ids in prefixes
        )
        # the expanded cache grows in place: it is never one a PrefixCache holds
        keep = cached if self.shared else None
        caches, logits = [], []
        for ids, count in zip(prefixes, rows, strict=True):
            found = None if keep is None else keep.get(ids)
            if found is None:
                cache = DynamicCache(config=model.config)
                out = model(
                    torch.tensor([ids], device=model.device),
                    use_cache=True,
                    **{self.cache_name: cache},
                )
                found = (out[self.cache_name], out.logits[:, -1, :])
                if keep is not None:
                    keep.put(ids, *found)
            caches.append(found[0])
            # a copy: whatever a row's processors do to its logits never reaches the cache
            logits.append(found[1].clone().expand(count, -1))
        #: next-token logits of every live row, shape (rows, vocab)
        self.logits: torch.Tensor = logits[0] if len(logits) == 1 else torch.cat(logits)
        if self.shared:
            self.state = shared_prefix.SharedPrefixState(caches, rows, max_new_tokens)
        elif len(caches) == 1:
            self.cache = caches[0]
            self.cache.batch_repeat_interleave(rows[0])

    def keep(self, rows: list[int]) -> None:
        """Keep only these live rows (indices into the current batch, ascending)."""
        index = torch.tensor(rows, device=self.model.device)
        if self.shared:
            self.state.keep_rows(index)
        else:
            self.cache.batch_select_indices(index)

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed one token per live row; returns the next logits, shape (rows, vocab)."""
        tokens = tokens.to(self.model.device)
        if self.shared:
            with shared_prefix.decoding(self.model):
                out = self.model(
                    tokens[:, None],
                    position_ids=self.state.position_ids(),
                    use_cache=False,
                    **{shared_prefix.STATE_KWARG: self.state},
                )
            self.state.advance()
        else:
            out = self.model(tokens[:, None], use_cache=True, **{self.cache_name: self.cache})
            self.cache = out[self.cache_name]
        self.logits = out.logits[:, -1, :]
        return self.logits
