"""Shared-prefix ("cascade") attention for decoding N continuations of one prefix.

Expanding the prefix's KV cache to N rows copies it N times and makes every decode step read
N copies (and transformers' ``DynamicCache`` re-concatenates them each step), which makes
N candidates of a long context far slower than of a short prompt (measured: docs/usage.md,
"Candidate engines"). Here the
prefix keys/values are kept once, shape (1, kv_heads, P, d), and each row's own tokens go
into a preallocated suffix buffer. Attention for a decode query is one softmax over
[prefix scores | suffix scores], the prefix part computed as a single batched matmul
against the shared keys. Several prefixes can decode in one batch (concurrent requests):
each group of rows attends to its own prefix, and the rest of the model runs on all rows.
Exact (same math as attending to the concatenation); the test suite checks it against
transformers' own cached decoding.

It plugs into transformers through its public ``AttentionInterface``: during decoding the
model runs with ``attn_implementation="samark_shared_prefix"`` and the state rides in the
forward kwargs; without that state the function defers to SDPA.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from transformers import AttentionInterface, DynamicCache, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface

IMPLEMENTATION = "samark_shared_prefix"
STATE_KWARG = "samark_shared_prefix_state"


class SharedPrefixState:
    """The prefix KV (once per prefix) and the rows' suffix KV (preallocated) for every
    layer.

    Rows decode continuations of one prefix, or of several (``prefixes[g]`` for
    ``rows[g]`` consecutive rows: concurrent requests batched together). Every row has
    decoded the same number of suffix tokens; a row's position counts from its own prefix.
    """

    def __init__(
        self, prefixes: Sequence[DynamicCache], rows: Sequence[int], max_new_tokens: int
    ) -> None:
        if len(prefixes) != len(rows) or not prefixes or min(rows) < 1:
            raise ValueError("need one positive row count per prefix")
        #: per prefix, per layer: keys (kv_heads, d, P) and values (kv_heads, P, d)
        self.prefix_keys: list[list[torch.Tensor]] = []
        self.prefix_values: list[list[torch.Tensor]] = []
        for prefix in prefixes:
            keys, values = [], []
            for layer in prefix.layers:
                k, v = getattr(layer, "keys", None), getattr(layer, "values", None)
                if k is None or v is None:  # (1, kv, P, d) each
                    raise ValueError("the prefix cache has an empty layer")
                keys.append(k[0].transpose(1, 2).contiguous())
                values.append(v[0].contiguous())
            self.prefix_keys.append(keys)
            self.prefix_values.append(values)
        self.suffix_keys: list[torch.Tensor] = []
        self.suffix_values: list[torch.Tensor] = []
        total = sum(rows)
        self.device = self.prefix_values[0][0].device
        for v in self.prefix_values[0]:
            shape = (total, v.shape[0], max_new_tokens, v.shape[2])
            self.suffix_keys.append(torch.empty(shape, dtype=v.dtype, device=v.device))
            self.suffix_values.append(torch.empty(shape, dtype=v.dtype, device=v.device))
        self.prefix_lengths = [int(values[0].shape[1]) for values in self.prefix_values]
        #: the prefix of each live row (rows stay ordered by prefix)
        self.row_prefix = torch.repeat_interleave(
            torch.arange(len(rows), device=self.device), torch.tensor(rows, device=self.device)
        )
        self.counts = list(rows)  # live rows per prefix
        self.rows = total
        self.length = 0  # suffix tokens already stored (the current one is written next)

    @property
    def prefix_length(self) -> int:
        """The (first) prefix's length."""
        return self.prefix_lengths[0]

    @property
    def position(self) -> int:
        """The absolute position of the token being decoded (one prefix)."""
        return self.prefix_length + self.length

    def position_ids(self) -> torch.Tensor:
        """The absolute position of the token each row decodes, shape (rows, 1); one
        prefix: (1, 1), broadcast."""
        if len(self.prefix_lengths) == 1:
            return torch.tensor([[self.position]], device=self.device)
        lengths = torch.tensor(self.prefix_lengths, device=self.device)[self.row_prefix]
        return (lengths + self.length)[:, None]

    def advance(self) -> None:
        self.length += 1

    def keep_rows(self, rows: torch.Tensor) -> None:
        """Keep only the batch rows ``rows`` (ascending), compacted in place."""
        s = self.length
        for buf in (*self.suffix_keys, *self.suffix_values):
            buf[: len(rows), :, :s] = buf[rows, :, :s]
        self.rows = len(rows)
        self.row_prefix = self.row_prefix[rows]
        self.counts = torch.bincount(self.row_prefix, minlength=len(self.counts)).tolist()


def _attend(
    q: torch.Tensor,
    sk: torch.Tensor,
    sv: torch.Tensor,
    pk: torch.Tensor,
    pv: torch.Tensor,
    scale: float,
    softcap: float | None,
) -> torch.Tensor:
    """Attention of decode queries ``q`` (rows, kv_heads, groups, d) over one shared
    prefix (keys ``pk`` (kv_heads, d, P), values ``pv`` (kv_heads, P, d)) and each row's
    own suffix ``sk``/``sv`` (rows, kv_heads, S, d): one softmax over both."""
    rows, kv_heads, groups, dim = q.shape
    # prefix: one (kv_heads)-batched matmul against the shared keys, for all rows at once
    flat = q.transpose(0, 1).reshape(kv_heads, rows * groups, dim)
    prefix_scores = torch.bmm(flat, pk)
    prefix_scores = prefix_scores.view(kv_heads, rows, groups, -1).transpose(0, 1)
    suffix_scores = torch.matmul(q, sk.transpose(-1, -2))
    scores = torch.cat([prefix_scores, suffix_scores], dim=-1) * scale
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
    p = pk.shape[-1]
    prefix_probs = probs[..., :p].transpose(0, 1).reshape(kv_heads, rows * groups, p)
    out = torch.bmm(prefix_probs, pv)
    out = out.view(kv_heads, rows, groups, dim).transpose(0, 1)
    return out + torch.matmul(probs[..., p:], sv)


def shared_prefix_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    state: SharedPrefixState | None = kwargs.pop(STATE_KWARG, None)
    if state is None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    layer = int(module.layer_idx)  # type: ignore[arg-type]
    rows, heads, q_len, dim = query.shape
    if q_len != 1:
        raise ValueError("shared-prefix attention decodes one token per row at a time")
    kv_heads = key.shape[1]
    s = state.length
    sk = state.suffix_keys[layer][: state.rows]
    sv = state.suffix_values[layer][: state.rows]
    sk[:, :, s] = key[:, :, 0]
    sv[:, :, s] = value[:, :, 0]
    scale = scaling if scaling is not None else dim**-0.5
    q = query.reshape(rows, kv_heads, heads // kv_heads, dim)  # grouped by their kv head
    softcap = kwargs.get("softcap")
    outs, start = [], 0
    for g, count in enumerate(state.counts):  # the rows of each prefix, in order
        if count:
            end = start + count
            pk, pv = state.prefix_keys[g][layer], state.prefix_values[g][layer]
            outs.append(
                _attend(
                    q[start:end],
                    sk[start:end, :, : s + 1],
                    sv[start:end, :, : s + 1],
                    pk,
                    pv,
                    scale,
                    softcap,
                )
            )
            start = end
    out = outs[0] if len(outs) == 1 else torch.cat(outs)
    return out.reshape(rows, 1, heads, dim), None


def _no_mask(*args: object, **kwargs: object) -> None:
    """Decode steps need no mask: every row attends to its whole prefix and suffix."""
    return None


AttentionInterface.register(IMPLEMENTATION, shared_prefix_attention)
AttentionMaskInterface.register(IMPLEMENTATION, _no_mask)


def supports(model: PreTrainedModel, context_tokens: int) -> bool:
    """Whether shared-prefix decoding is exact for ``model`` at this total length.

    Sliding-window layers only see the last ``window`` positions; beyond that this path would
    attend too far, so the caller falls back to the expanded cache.
    """
    config = model.config.get_text_config()
    window = getattr(config, "sliding_window", None)
    if window is not None and context_tokens > int(window):
        return False
    return getattr(config, "attn_logit_softcapping", None) is None


@contextlib.contextmanager
def decoding(model: PreTrainedModel) -> Iterator[None]:
    """Run ``model`` with shared-prefix attention inside the block, then restore it."""
    configs = {id(c): c for c in (model.config, model.config.get_text_config())}.values()
    saved = [(c, c._attn_implementation) for c in configs]
    try:
        for c, _ in saved:
            c._attn_implementation = IMPLEMENTATION
        yield
    finally:
        for c, impl in saved:
            c._attn_implementation = impl
