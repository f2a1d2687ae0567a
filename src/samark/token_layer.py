"""A keyed green-list token watermark (the KGW family, Kirchenbauer et al. 2023) that runs
inside the candidate engine, on every candidate row: the token layer of
``samark-layered``.

Why our own and not transformers' ``WatermarkLogitsProcessor``:

- **Context width.** transformers' ``lefthash`` seeds the green list from the last token
  only (``context_width`` is ignored there), and its ``selfhash`` scores 40 green lists per
  row and step. A one-token context is learned from a few thousand outputs by the
  watermark-stealing attacks (Jovanovic et al. 2024); here the green list of a position
  depends on the previous ``context`` tokens (default 4) through a keyed PRF.
- **Exact p-value.** The seed of a position is ``BLAKE2b(sub-key, previous tokens)``; a
  token is green when ``splitmix64(seed xor token * phi) < gamma * 2**64``. Over the key,
  every distinct (context, token) pair is green with probability ``gamma``, independently
  (for an ideal PRF), so on a text that does not depend on the key the number of green
  pairs among ``n`` distinct ones is Binomial(n, gamma): its upper tail is an exact
  p-value (conservative by discreteness), with no normal approximation.
- **Cost.** One BLAKE2b call per row and step, and a vectorised 64-bit mix over the
  vocabulary (cached per context): milliseconds per candidate sentence.

Why a green list and not a distortion-free (Gumbel / exponential) sampler: given its
context, a Gumbel sampler's next token is a deterministic function of the key, so the N
candidates of one SAMark step would all start with the same token and collapse into a
handful of distinct sentences; the selection would have nothing to choose from. SynthID's
tournament keeps the rows stochastic, but transformers' processor carries state across
the steps of one ``generate`` call and the candidate engine drops finished rows from the
batch. The green list is stochastic, stateless and row-local.

Generation applies the bias after temperature and nucleus filtering, as transformers
orders its own watermark processors: the nucleus is the model's; within it, green tokens'
probabilities are multiplied by ``exp(delta)`` and renormalised.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

import numpy as np
from scipy.stats import binom

if TYPE_CHECKING:
    import torch

_PHI = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_PHI_INT, _M1_INT, _M2_INT = int(_PHI), int(_M1), int(_M2)
_MASK64 = 2**64 - 1
_SIGN = -(2**63)  # the sign bit, as an int64


def _as_int64(u: int) -> int:
    """An unsigned 64-bit integer's bits read as a signed one."""
    return u - 2**64 if u >= 2**63 else u


def _shift_right(x: torch.Tensor, k: int) -> torch.Tensor:
    """A logical right shift of an int64 tensor's bits (torch's ``>>`` is arithmetic)."""
    return (x >> k) & ((1 << (64 - k)) - 1)


_DOMAIN = b"samark/token-layer/v1"


class TokenLayerSpec(TypedDict):
    """A :class:`GreenListLayer` as another process rebuilds it (:meth:`GreenListLayer.to_spec`):
    its derived secret in hex, its vocabulary and its :class:`TokenLayerConfig`."""

    secret: str
    vocab_size: int
    gamma: float
    delta: float
    context: int


@dataclass(frozen=True)
class TokenLayerConfig:
    """The token layer's parameters (KGW's names: ``gamma`` the green share, ``delta`` the
    logit bias; ``context`` the number of previous tokens that seed a green list)."""

    gamma: float = 0.25
    delta: float = 2.0
    context: int = 4

    def __post_init__(self) -> None:
        if not 0.0 < self.gamma < 1.0:
            raise ValueError(f"gamma must be in (0, 1), got {self.gamma}")
        if not self.delta > 0.0:
            raise ValueError(f"delta must be > 0, got {self.delta}")
        if not 1 <= self.context <= 16:
            raise ValueError(f"context must be in [1, 16], got {self.context}")


@dataclass(frozen=True)
class TokenLayerScore:
    """What the token layer found in a token sequence."""

    #: distinct (context, token) pairs scored (repeats of a pair count once)
    n_scored: int
    n_green: int
    gamma: float

    @property
    def green_fraction(self) -> float:
        return self.n_green / self.n_scored if self.n_scored else float("nan")

    @property
    def z(self) -> float:
        n, g = self.n_scored, self.gamma
        if not n:
            return 0.0
        return float((self.n_green - g * n) / np.sqrt(n * g * (1 - g)))

    @property
    def p_value(self) -> float:
        """The exact binomial tail P(Binomial(n, gamma) >= n_green); 1 with nothing scored."""
        if not self.n_scored:
            return 1.0
        return float(binom.sf(self.n_green - 1, self.n_scored, self.gamma))


class GreenListLayer:
    """The keyed green list over a vocabulary of ``vocab_size`` token ids.

    ``secret`` is the layer's own sub-key (derive it one-way from the key file; it is never
    printed). Use :meth:`bias` to watermark a batch of rows and :meth:`score` to test a
    token sequence.
    """

    def __init__(self, secret: bytes, vocab_size: int, config: TokenLayerConfig | None = None):
        if len(secret) < 16:
            raise ValueError("the token layer's sub-key needs at least 16 bytes")
        if vocab_size < 2:
            raise ValueError(f"vocab_size must be >= 2, got {vocab_size}")
        self.config = config or TokenLayerConfig()
        self.vocab_size = vocab_size
        self._secret = hashlib.blake2b(_DOMAIN + secret, digest_size=32).digest()
        self._threshold_int = min(int(self.config.gamma * 2.0**64), 2**64 - 1)
        self._threshold = np.uint64(self._threshold_int)
        self._tokens = np.arange(vocab_size, dtype=np.uint64) * _PHI
        self._green = functools.lru_cache(maxsize=256)(self._green_uncached)
        self._tokens_held: dict[str, torch.Tensor] = {}  # _tokens on a torch device (bias_on)

    def __repr__(self) -> str:  # never the secret
        c = self.config
        return f"GreenListLayer(gamma={c.gamma}, delta={c.delta}, context={c.context})"

    def to_spec(self) -> TokenLayerSpec:
        """Everything a process needs to rebuild this layer (its derived secret included):
        for an engine in another process of this machine (vLLM's engine core). A secret:
        never log, print or store it."""
        c = self.config
        return {
            "secret": self._secret.hex(),
            "vocab_size": self.vocab_size,
            "gamma": c.gamma,
            "delta": c.delta,
            "context": c.context,
        }

    @classmethod
    def from_spec(cls, spec: TokenLayerSpec) -> GreenListLayer:
        """The layer :meth:`to_spec` describes."""
        config = TokenLayerConfig(spec["gamma"], spec["delta"], spec["context"])
        layer = cls(b"\0" * 16, int(spec["vocab_size"]), config)
        layer._secret = bytes.fromhex(spec["secret"])
        return layer

    @property
    def context(self) -> int:
        return self.config.context

    def seed(self, context: Sequence[int]) -> int:
        """The 64-bit seed of a position whose previous tokens end with ``context``."""
        tail = [int(t) for t in context[-self.config.context :]]
        data = b"".join(t.to_bytes(4, "little", signed=False) for t in tail)
        h = hashlib.blake2b(data, key=self._secret, digest_size=8)
        return int.from_bytes(h.digest(), "little")

    def _green_uncached(self, seed: int) -> np.ndarray:
        x = self._tokens ^ np.uint64(seed)
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        x = x ^ (x >> np.uint64(31))
        return x < self._threshold

    def _green_bit(self, seed: int, token: int) -> bool:
        """One token's colour: :meth:`_green_uncached` for a single id, in Python ints."""
        x = (seed ^ (token * _PHI_INT)) & _MASK64
        x = ((x ^ (x >> 30)) * _M1_INT) & _MASK64
        x = ((x ^ (x >> 27)) * _M2_INT) & _MASK64
        x ^= x >> 31
        return x < self._threshold_int

    def green_mask(self, context: Sequence[int]) -> np.ndarray:
        """Which token ids are green after ``context``: a bool array (vocab_size,)."""
        return self._green(self.seed(context))

    def is_green(self, context: Sequence[int], token: int) -> bool:
        return bool(self.green_mask(context)[int(token)])

    def bias(self, contexts: Sequence[Sequence[int]], width: int) -> np.ndarray:
        """The additive logit bias of each row (``delta`` on its green tokens), shape
        (rows, width). ``width`` is the logits' width: ids beyond the vocabulary (padding
        of the output layer) are never green."""
        out = np.zeros((len(contexts), width), dtype=np.float32)
        v = min(width, self.vocab_size)
        for i, ctx in enumerate(contexts):
            out[i, :v][self.green_mask(ctx)[:v]] = self.config.delta
        return out

    def bias_on(
        self, contexts: Sequence[Sequence[int]], width: int, device: torch.device | str
    ) -> torch.Tensor:
        """:meth:`bias` computed on ``device`` as a torch tensor (rows, width): the same
        values, with the rows x vocabulary hash run there (on a GPU, not on the CPU). The
        hash's unsigned 64-bit arithmetic runs in int64: products and xors wrap alike,
        right shifts are masked to be logical, and the comparison flips the sign bit."""
        import torch

        v = min(width, self.vocab_size)
        tokens = self._tokens_on(device)[:v]
        seeds = torch.tensor(
            [_as_int64(self.seed(ctx)) for ctx in contexts], dtype=torch.int64, device=device
        )
        x = tokens[None, :] ^ seeds[:, None]
        x = (x ^ _shift_right(x, 30)) * _as_int64(_M1_INT)
        x = (x ^ _shift_right(x, 27)) * _as_int64(_M2_INT)
        x = x ^ _shift_right(x, 31)
        green = (x ^ _SIGN) < _as_int64(self._threshold_int ^ (1 << 63))
        out = torch.zeros((len(contexts), width), dtype=torch.float32, device=device)
        out[:, :v] = green.to(torch.float32) * float(self.config.delta)
        return out

    def _tokens_on(self, device: torch.device | str) -> torch.Tensor:
        """The token ids' hashes (``_tokens``) as an int64 tensor on ``device``, kept."""
        import torch

        key = str(device)
        held = self._tokens_held.get(key)
        if held is None:
            held = torch.from_numpy(self._tokens.view(np.int64).copy()).to(device)
            self._tokens_held[key] = held
        return held

    def score(self, ids: Sequence[int]) -> TokenLayerScore:
        """Count green tokens among the distinct (context, token) pairs of ``ids``; the first
        ``context`` tokens have no full context and are not scored."""
        h = self.config.context
        seen: set[tuple[int, ...]] = set()
        green = 0
        for i in range(h, len(ids)):
            gram = tuple(int(t) for t in ids[i - h : i + 1])
            if gram in seen:
                continue
            seen.add(gram)
            token = gram[-1]
            if 0 <= token < self.vocab_size:
                green += self._green_bit(self.seed(gram[:-1]), token)
        return TokenLayerScore(len(seen), green, self.config.gamma)
