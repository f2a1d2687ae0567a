"""Keyed semantic cells: pivots that change from sentence to sentence (issue 44).

SAMark's static pivots make the mark one offset along the key that every sentence shares.
A coherent text's topic is such an offset too: under the null, a random pivot's projection
of the text's mean embedding has spread ``|mean| / sqrt(dim)``, which does not shrink with
more sentences when they say similar things. Short, repetitive texts then carry about one
sentence of evidence (docs/results/2026-11-27-semantic-cells).

Here the key also cuts meaning space into ``M`` cells: ``M`` keyed anchors, a sentence
belongs to the cell of its nearest anchor (self-anchored, like the paper's r_t =
R(phi(u_t); k): read from the sentence itself, so shuffling and mixing keep it). Each cell
has its own ``c`` keyed orthonormal pivots and ``c`` keyed flags. A sentence is scored on
its own cell's pivots, signed by its cell's flags and by one random sign per generation
(drawn at generation, majority-voted at detection over every sentence and channel). Two
sentences in different cells meet independent pivots, so their null projections are
independent and evidence adds up as sqrt(n). The per-generation sign keeps a cell's marked
sentences from leaning one way on average (a first-moment leak a forger would average out).

The p-value stays exact: the key's cells (anchors, pivots, flags) are one draw of a public
law (anchors Haar on the sphere; each cell's pivots from the key's own pivot law; flags
fair coins), and the detector scores the text under ``n_null`` public draws of the same law.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from samark.keys import WatermarkKey
from samark.keys.pivots import PivotLaw, derive_pivots, derive_pivots_in_space

#: null cell sets are drawn in chunks of this many (bounds the peak memory of the draw)
_CHUNK = 64


@dataclass(frozen=True)
class CellFrames:
    """``K`` keys' cells at once: anchors (K, M, d), pivots (K, M, c, d), flags (K, M, c),
    float32 (cosines to 1e-7; every key and null set alike)."""

    anchors: np.ndarray
    pivots: np.ndarray
    flags: np.ndarray

    @property
    def count(self) -> int:
        return int(self.anchors.shape[0])

    @property
    def cells(self) -> int:
        return int(self.anchors.shape[1])

    def cell_of(self, embeddings: np.ndarray) -> np.ndarray:
        """Each sentence's cell under each key, shape (K, n)."""
        k, m, d = self.anchors.shape
        scores = embeddings.astype(np.float32) @ self.anchors.reshape(k * m, d).T
        return np.ascontiguousarray(scores.reshape(-1, k, m).argmax(axis=2).T)

    def cell_margin(self, embeddings: np.ndarray) -> np.ndarray:
        """Each sentence's margin in its cell under each key: its cosine to its cell's
        anchor minus that to the runner-up's, shape (K, n); how far a paraphrase may move
        it before it is scored in another cell."""
        k, m, d = self.anchors.shape
        scores = (embeddings.astype(np.float32) @ self.anchors.reshape(k * m, d).T).reshape(
            -1, k, m
        )
        top2 = -np.partition(-scores, 1, axis=2)[:, :, :2]
        return np.ascontiguousarray((top2[:, :, 0] - top2[:, :, 1]).T).astype(np.float64)

    def signed(self, embeddings: np.ndarray) -> np.ndarray:
        """Each sentence's cosines to its own cell's pivots, signed by the cell's flags,
        shape (K, n, c)."""
        k, m, c, d = self.pivots.shape
        n = embeddings.shape[0]
        cells = self.cell_of(embeddings)  # (K, n)
        cos = (embeddings.astype(np.float32) @ self.pivots.reshape(k * m * c, d).T).reshape(
            n, k, m, c
        )
        rows = np.arange(k)[:, None]
        own = cos.transpose(1, 0, 2, 3)[rows, np.arange(n)[None, :], cells]  # (K, n, c)
        return (own * self.flags[rows, cells]).astype(np.float64)

    def __getitem__(self, keys: slice) -> CellFrames:
        """The keys ``keys`` (a slice) of the frame, as a frame (views, no copy)."""
        return CellFrames(self.anchors[keys], self.pivots[keys], self.flags[keys])

    def join(self, other: CellFrames) -> CellFrames:
        return CellFrames.stack([self, other])

    @staticmethod
    def stack(frames: Sequence[CellFrames]) -> CellFrames:
        """Every frame's keys in one, in order (one copy, however many frames)."""
        return CellFrames(
            np.concatenate([f.anchors for f in frames]),
            np.concatenate([f.pivots for f in frames]),
            np.concatenate([f.flags for f in frames]),
        )


def text_signs(signed: np.ndarray) -> np.ndarray:
    """The generation's sign under each key, majority-voted over every sentence and
    channel (ties: +1), shape (K,)."""
    return np.where(signed.sum(axis=(1, 2)) >= 0, 1.0, -1.0)


def cell_evidence(signed: np.ndarray, kappa: float, use_tanh: bool = True) -> np.ndarray:
    """Evidence ``tanh(kappa * s_hat * signed)`` per key, sentence and channel (K, n, c)."""
    aligned = signed * text_signs(signed)[:, None, None]
    return np.tanh(kappa * aligned) if use_tanh else aligned


def key_cells(key: WatermarkKey, dim: int, cells: int, channels: int) -> CellFrames:
    """``key``'s cells (K = 1): each anchor, pivot set and flag pattern derived one-way
    from the key's secret under its own label; the pivots follow the key's pivot law."""
    law = key.samark.pivot_law(dim)
    anchors = np.empty((1, cells, dim), dtype=np.float32)
    pivots = np.empty((1, cells, channels, dim), dtype=np.float32)
    flags = np.empty((1, cells, channels), dtype=np.float32)
    for m in range(cells):
        anchors[0, m] = derive_pivots(_secret(key, "anchor", m), dim, 1)[0]
        pivots[0, m] = _law_pivots(law, _secret(key, "pivots", m), dim, channels)
        bits = key.derive_ints(f"samark/cells/flags/{m}", channels, bits=1)
        flags[0, m] = [1.0 if b else -1.0 for b in bits]
    return CellFrames(anchors, pivots, flags)


def _secret(key: WatermarkKey, what: str, m: int) -> bytes:
    words = key.derive_ints(f"samark/cells/{what}/{m}", 4, bits=64)
    return b"".join(w.to_bytes(8, "little") for w in words)


def _law_pivots(law: PivotLaw, secret: bytes, dim: int, channels: int) -> np.ndarray:
    rows = np.frombuffer(law.directions, "<f8").reshape(law.rows, dim) if law.rows else None
    if law.kind == "space":
        assert rows is not None
        return derive_pivots_in_space(secret, rows, channels)
    return derive_pivots(secret, dim, channels, rows)


@functools.lru_cache(maxsize=4)
def null_cells(
    law: PivotLaw, count: int, dim: int, cells: int, channels: int, seed: int
) -> CellFrames:
    """``count`` public cell sets from the keys' law (the detector's exchangeable stand-ins),
    drawn in chunks; cached per law and settings."""
    anchors = np.empty((count, cells, dim), dtype=np.float32)
    pivots = np.empty((count, cells, channels, dim), dtype=np.float32)
    flags = np.empty((count, cells, channels), dtype=np.float32)
    for start in range(0, count, _CHUNK):
        chunk = _null_chunk(law, start, min(_CHUNK, count - start), dim, cells, channels, seed)
        anchors[start : start + chunk.count] = chunk.anchors
        pivots[start : start + chunk.count] = chunk.pivots
        flags[start : start + chunk.count] = chunk.flags
    return CellFrames(anchors, pivots, flags)


def _null_chunk(
    law: PivotLaw, start: int, size: int, dim: int, cells: int, channels: int, seed: int
) -> CellFrames:
    """Null cell sets ``start .. start + size`` (``start`` a multiple of the chunk size):
    a function of ``start`` alone, so any run of chunks is the same draws as one block."""
    sequence = np.random.SeedSequence([seed, dim, cells, channels, start, 0xCE11])
    chunk_seed = int(sequence.generate_state(1)[0])
    rng = np.random.default_rng(chunk_seed)
    a = rng.standard_normal((size, cells, dim))
    anchors = (a / np.linalg.norm(a, axis=2, keepdims=True)).astype(np.float32)
    flags = rng.choice([-1.0, 1.0], size=(size, cells, channels)).astype(np.float32)
    p = law.null_pivots(size * cells, dim, channels, chunk_seed)
    pivots = p.reshape(size, cells, channels, dim).astype(np.float32)
    return CellFrames(anchors, pivots, flags)


#: the most null cell sets (draws x cells) a detector holds in memory, 0.55 GiB of float32
#: anchors and pivots at c = 2 and 768-d (999 draws of 64 cells; 16 cells: 3,968 draws). A
#: keyring needs more draws (``ring_null_count``: 7,999 for 8 keys at alpha 1%): the draws
#: beyond are regenerated, chunk by chunk, each time texts are scored (the same draws)
HELD_NULL_CELLS = 64_000

#: null draws scored at once from the held block (bounds the cosines of one pass)
_SLICE = 256


@dataclass(frozen=True)
class NullCellDraws:
    """The detector's ``count`` public null cell sets, in memory up to ``hold`` cell sets
    and regenerated beyond: :meth:`blocks` yields all ``count`` of them in order, the same
    draws as :func:`null_cells` of ``count`` whatever ``hold`` is."""

    law: PivotLaw
    count: int
    dim: int
    cells: int
    channels: int
    seed: int
    hold: int = HELD_NULL_CELLS

    @property
    def held(self) -> int:
        """Draws held in memory: all of them if they fit in ``hold`` cell sets, else a
        whole number of chunks that does."""
        if self.count * self.cells <= self.hold:
            return self.count
        return (self.hold // self.cells) // _CHUNK * _CHUNK

    @property
    def streamed(self) -> bool:
        return self.held < self.count

    def held_block(self) -> CellFrames:
        """The draws held in memory (built once per process and settings)."""
        return null_cells(self.law, self.held, self.dim, self.cells, self.channels, self.seed)

    def blocks(self) -> Iterator[CellFrames]:
        """Every draw, in order: the held ones in slices, then the others chunk by chunk
        (peak memory: the held block and one chunk)."""
        if self.held:
            block = self.held_block()
            for start in range(0, self.held, _SLICE):
                yield block[start : start + _SLICE]
        for start in range(self.held, self.count, _CHUNK):
            size = min(_CHUNK, self.count - start)
            yield _null_chunk(self.law, start, size, self.dim, self.cells, self.channels, self.seed)

    @property
    def nbytes_per_draw(self) -> int:
        """Bytes of one draw (anchors, pivots, flags in float32)."""
        return 4 * self.cells * (self.dim + self.channels * self.dim + self.channels)
