"""UPV (Liu et al. 2024, "An Unforgeable Publicly Verifiable Watermark for Large Language
Models"): the green list is decided by a small neural network instead of a hash. The
*generator network* reads the previous token and a candidate token, each as the 16 bits of
its id, through one shared token network (an MLP), and outputs the probability that the
pair is green. It is trained on random, balanced labels (for each random previous token,
one random next token labelled green and one red), so that about half of the tokens are
green after any token. Generation adds ``delta`` to the logits of the green tokens among
the ``top_k`` most likely ones.

Detection here is the paper's key-based ("private") detection: count the green pairs
among the text's distinct (previous, token) pairs and compare with ``gamma``.

Ours, all measured in docs/baselines.md:
- The network is trained from the run's key (a derived seed) with UPV's recipe: 2,000
  random previous tokens, 300 epochs of Adam on BCE (float64, one thread, once per
  process). UPV's trained networks cannot be downloaded; ours see random token ids only.
- *The threshold.* A network trained on random labels is balanced over random token ids,
  not over text (with a fixed threshold of 0.5, keys' green shares on human text varied
  by key). A pair is green when the output exceeds the key's threshold: the ``1 - gamma``
  quantile of its outputs over reference text, the distinct pairs of each of the first
  3,000 Wikipedia leads of at most four sentences (too short to be a human negative of any
  run).
- *The variance.* The colour depends mostly on the token, so a text that repeats a word in
  new contexts repeats its colour: a text's green share spreads more than binomial. The z
  adds a between-text variance, ``(green - gamma T) / sqrt(T gamma (1 - gamma) +
  (sigma T)^2)`` with ``sigma = 0.02`` (UPV's own ``sigma^2 T`` term, with sigma
  0.01, vanishes against the binomial one); the p-value is its normal tail, an
  approximation whose false-positive rate is measured, not assumed.
- UPV's *public* detector (an LSTM over the shared token network, trained on random token
  sequences labelled by the key-based z) is not built: its output is a classifier's score
  with no p-value, and the paper's detection figures are the key-based ones.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Unpack

import numpy as np
import torch
from scipy.stats import norm
from torch import nn
from transformers import LogitsProcessor

from samark.detection_result import Detection
from samark.keys import WatermarkKey
from samark.sampling.transformers_engine import TransformersEngine
from samark.schemes.base import check, register_scheme
from samark.schemes.lm_generate import (
    ProcessorWatermarking,
    TokenRowModels,
    TokenWatermark,
    TokenWatermarkConfig,
    WatermarkingSource,
    token_ids,
    vocab_size,
)

BITS = 16  # token ids as 16 bits: vocabularies up to 65,536 (SmolLM2: 49,152)


def token_bits(ids: torch.Tensor, bits: int = BITS) -> torch.Tensor:
    """Each id's ``bits`` binary digits, most significant first, as float64 (..., bits)."""
    shifts = torch.arange(bits - 1, -1, -1, dtype=torch.long, device=ids.device)
    return ((ids.long()[..., None] >> shifts) & 1).to(torch.float64)


class GreenNetwork(nn.Module):
    """UPV's generator network: a shared token MLP over each token of the window (the
    previous ``window - 1`` tokens and the candidate), concatenated, then a hidden layer and
    a sigmoid: the probability that the candidate is green after its prefix."""

    def __init__(self, window: int = 2, layers: int = 5, hidden: int = 64) -> None:
        super().__init__()
        blocks: list[nn.Module] = [nn.Linear(BITS, hidden), nn.ReLU()]
        for _ in range(layers - 1):
            blocks += [nn.Linear(hidden, hidden), nn.ReLU()]
        blocks.append(nn.Linear(hidden, hidden))
        self.token_net = nn.Sequential(*blocks)
        self.combine = nn.Sequential(nn.Linear(window * hidden, hidden), nn.ReLU())
        self.out = nn.Linear(hidden, 1)
        self.window = window

    def forward(self, windows: torch.Tensor) -> torch.Tensor:
        """``windows`` (batch, window) token ids -> green probabilities (batch,)."""
        feats = self.token_net(token_bits(windows))  # (batch, window, hidden)
        joined = self.combine(feats.reshape(windows.shape[0], -1))
        return torch.sigmoid(self.out(joined)).squeeze(-1)


@functools.lru_cache(maxsize=4)
def train_green_network(
    seed: int,
    vocab: int,
    *,
    prefixes: int = 2000,
    epochs: int = 300,
    batch: int = 64,
    window: int = 2,
) -> GreenNetwork:
    """UPV's recipe: for each of ``prefixes`` random prefixes, two random next tokens, one
    labelled green and one red; 300 epochs of Adam (lr 1e-3) on BCE. Deterministic for a
    seed on one machine (float64, one thread); kept per process. Fewer epochs leave the
    network less random, and its keys flag more human text (its cost and both counts:
    docs/baselines.md, UPV)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        # first use may come from inside ``generate`` (inference mode): training needs
        # autograd and tensors made outside inference mode
        with torch.inference_mode(False), torch.enable_grad():
            net = _fit(seed, vocab, prefixes, epochs, batch, window)
    finally:
        torch.set_num_threads(threads)
    net.eval()
    for p in net.parameters():
        p.requires_grad_(False)
    return net


def _fit(
    seed: int, vocab: int, prefixes: int, epochs: int, batch: int, window: int
) -> GreenNetwork:
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = GreenNetwork(window).to(torch.float64)
    prefix = torch.randint(1, vocab, (prefixes, window - 1), generator=gen)
    nxt = torch.randint(1, vocab, (prefixes, 2), generator=gen)
    first_green = torch.randint(0, 2, (prefixes,), generator=gen).to(torch.float64)
    windows = torch.cat([torch.cat([prefix, nxt[:, :1]], 1), torch.cat([prefix, nxt[:, 1:]], 1)])
    labels = torch.cat([first_green, 1 - first_green])
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = nn.BCELoss()
    for _ in range(epochs):
        order = torch.randperm(len(labels), generator=gen)
        for start in range(0, len(order), batch):
            idx = order[start : start + batch]
            opt.zero_grad()
            loss_fn(net(windows[idx]), labels[idx]).backward()
            opt.step()
    return net


@functools.lru_cache(maxsize=2)
def reference_pairs(
    lm: TransformersEngine, max_sentences: int = 4, count: int = 3000
) -> torch.Tensor:
    """Each of the first ``count`` Wikipedia leads of at most ``max_sentences`` sentences
    as its distinct (previous, token) id pairs, in ``lm``'s tokenizer, concatenated: UPV's
    threshold reference. Distinct per lead, as detection counts them per text (a pair
    common to many texts, such as "of the", weighs as often as it is scored). Kept per
    process and generator, for every key (read-only)."""
    from samark.datasets import load_dataset
    from samark.segment import split_sentences

    rows: list[torch.Tensor] = []
    for doc in load_dataset("wikipedia_leads"):
        if len(rows) == count:
            break
        if len(split_sentences(doc.text)) <= max_sentences:
            ids = token_ids(lm, doc.text)[0]
            if len(ids) >= 2:
                rows.append(torch.unique(torch.stack([ids[:-1], ids[1:]], 1), dim=0))
    return torch.cat(rows)


class UPVBias(LogitsProcessor):
    """Adds ``delta`` to the green tokens among each row's ``top_k`` logits."""

    def __init__(self, scheme: UPV) -> None:
        self.scheme = scheme

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        width = self.scheme.network.window - 1  # >= 1
        if input_ids.shape[-1] < width:
            return scores
        finite = torch.isfinite(scores).sum(dim=-1).clamp(min=1)
        out = scores.clone()
        for row in range(scores.shape[0]):
            k = int(min(self.scheme.config.top_k, int(finite[row])))
            top = torch.topk(scores[row], k).indices
            prefix = input_ids[row, -width:].expand(k, width)
            green = self.scheme.is_green(torch.cat([prefix, top[:, None]], 1))
            out[row, top[green]] += self.scheme.config.delta
        return out  # type: ignore[return-value]


@dataclass(frozen=True)
class UPVConfig(TokenWatermarkConfig):
    """The green share ``gamma``, the logit bias ``delta`` on the ``top_k`` likeliest
    tokens, the detector's allowance ``sigma`` for the network's error, and the network's
    training ``epochs`` (the paper's recipe)."""

    gamma: float = 0.5
    delta: float = 2.0
    top_k: int = 20
    sigma: float = 0.02
    epochs: int = 300

    def __post_init__(self) -> None:
        super().__post_init__()
        check(
            0 < self.gamma < 1
            and self.delta > 0
            and self.top_k >= 1
            and self.sigma >= 0
            and self.epochs >= 1,
            "need 0 < gamma < 1, delta > 0, top_k >= 1, sigma >= 0, epochs >= 1",
        )


@register_scheme("upv")
class UPV(TokenWatermark):
    """UPV: a neural green list trained from the key, a top-k logit bias, UPV's z-test."""

    name = "upv"

    config_class = UPVConfig
    config: UPVConfig

    def __init__(
        self, key: WatermarkKey, config: UPVConfig | None = None, **models: Unpack[TokenRowModels]
    ) -> None:
        super().__init__(key, config, **models)
        (self._seed,) = self.derived_keys(1)
        self._net: GreenNetwork | None = None
        self._tau = 0.5

    @property
    def network(self) -> GreenNetwork:
        """The key's generator network (trained, and its threshold set, on first use)."""
        if self._net is None:
            size = vocab_size(self.lm)
            if size > 2**BITS:
                raise ValueError(f"upv encodes token ids in {BITS} bits; vocabulary is {size}")
            net = train_green_network(self._seed, size, epochs=self.config.epochs)
            with torch.no_grad():
                outputs = net(reference_pairs(self.lm))
            self._tau = float(torch.quantile(outputs, 1 - self.config.gamma))
            self._net = net
        return self._net

    @property
    def threshold(self) -> float:
        """The key's threshold: a pair is green when the network's output exceeds it (the
        ``1 - gamma`` quantile of its outputs over reference text; set, with the network,
        on first use)."""
        _ = self.network
        return self._tau

    def load_network(self, state: Mapping[str, torch.Tensor], threshold: float) -> GreenNetwork:
        """Use the network and threshold trained earlier for this key (``network``'s
        ``state_dict()`` and ``threshold``, saved) instead of training them again on first
        use; returns the network, as ``network`` would. The caller vouches that they are
        this key's (and this config's): a state saved under another key makes this scheme
        detect and generate as that key."""
        if not 0.0 <= threshold <= 1.0:  # the network's output is a probability
            raise ValueError(f"threshold must be in [0, 1], got {threshold!r}")
        net = GreenNetwork().to(torch.float64)
        net.load_state_dict(state)
        net.eval()
        for p in net.parameters():
            p.requires_grad_(False)
        self._net, self._tau = net, float(threshold)
        return net

    def is_green(self, windows: torch.Tensor) -> torch.Tensor:
        """Whether each (previous, token) row of ``windows`` is green under this key."""
        net = self.network
        with torch.no_grad():
            return net(windows) > self._tau

    def watermarking_config(self) -> WatermarkingSource:
        return ProcessorWatermarking(lambda _size, _device: UPVBias(self))

    def detector_id(self) -> str:
        return f"upv/g{self.config.gamma}/s{self.config.sigma}/e{self.config.epochs}/ref-wiki4"

    def green_pairs(self, text: str) -> tuple[int, int]:
        """(green, scored) over the text's distinct (previous, token) pairs."""
        ids = token_ids(self.lm, text)[0]
        if len(ids) < 2:
            raise self.too_short(2)
        pairs = torch.unique(torch.stack([ids[:-1], ids[1:]], 1), dim=0)
        return int(self.is_green(pairs).sum()), len(pairs)

    def detect(self, text: str) -> Detection:
        self.require_text(text)
        k, n = self.green_pairs(text)
        gamma, sigma = self.config.gamma, self.config.sigma
        z = (k - gamma * n) / math.sqrt(n * gamma * (1 - gamma) + (sigma * n) ** 2)
        return Detection(
            scheme=self.name,
            p_value=float(np.clip(norm.sf(z), 0.0, 1.0)),
            alpha=self.alpha,
            z=z,
            statistic="upv_z",
            score=z,
            n_units=n,
            unit="token",
            details={"green_fraction": k / n},
        )
