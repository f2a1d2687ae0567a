"""Null cell draws in a text's own span: the exact law of what a text sees of the detector's
public draws, at the cost of its sentence count rather than the embedding's dimension.

A text of ``n`` unit sentence embeddings ``E`` (n, d) meets a null cell draw only through
its cosines: to the draw's anchors (which cell each sentence falls in) and to its cells'
pivots. Those cosines have a law of their own in ``r = rank(E) <= n`` dimensions:

- **Anchors** (Haar on the sphere) are ``g / |g|`` for a standard Gaussian ``g`` in R^d. With
  ``Q`` an orthonormal basis of E's row space, ``E g = (E Q^T) z`` for ``z = Q g`` ~ N(0, I_r),
  and ``|g|^2 = |z|^2 + s`` with ``s`` ~ chi-square(d - r), independent of ``z``. So a sentence's
  cosine to an anchor is ``(E Q^T z) / sqrt(|z|^2 + s)``: r normals and one chi-square an
  anchor instead of d normals.
- **Pivots** (the key's law: Haar-random orthonormal frames in a public subspace V, the
  complement of the avoided directions or a shipped pivot space) are the Gram-Schmidt frame
  ``P = H R^-1`` of a standard Gaussian ``H`` (d, c) in V, ``R^T R = H^T H`` (R upper
  triangular, positive diagonal: the Cholesky factor). With ``Q`` a basis of the row space of
  E projected on V (rank r), ``H = Q^T Z + H_perp``, ``Z`` ~ N(0, I) (r, c) and ``H_perp``
  Gaussian in the rest of V, so ``E H = (E Q^T) Z`` and ``H^T H = Z^T Z + W`` with ``W`` ~
  Wishart_c(dim V - r, I), independent of ``Z`` (Bartlett's decomposition draws it from c
  chi-squares and c(c-1)/2 normals). The cosines are ``(E Q^T) Z R^-1``.
- **Cells** are independent draws, so a sentence needs only its own cell's pivots and
  flags: each draw gets one pivot set and flag pattern per *distinct* cell its sentences fall
  in (drawn for each sentence slot and read by the first sentence of each cell). Cells no
  sentence falls in are never drawn.

Every quantity the detector computes from a draw (each sentence's cell and its signed
cosines) therefore has exactly the law it has under :func:`~samark.schemes.samark.cells.null_cells`,
so the p-value stays exact; the draws themselves differ (a text's p-value moves within its
Monte Carlo error), which is why a key names which draws it is detected with
(``PivotDraw.null_draws``: keys written before 2026-11-28 keep the full draws). Each text
draws from the same seeded stream, so its p-value does not depend on the texts scored beside
it. A test compares the two laws (two-sample KS over 10,000 draws).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from samark.keys.pivots import PivotLaw

#: draws that share one seeded random stream (at most): a text's draws are a function of the
#: seed, its ranks and sentence count alone
_BLOCK = 1024

#: random numbers one block of draws may hold (a long text's blocks are smaller)
_BLOCK_ELEMENTS = 8_000_000

#: bounds the gathered pivot coordinates of one step (draws x sentences x rank x channels)
_STEP_ELEMENTS = 4_000_000

#: a direction of E whose singular value is below this share of the largest is dropped
#: (a text's repeated sentences); what is dropped moves a cosine by less than 1e-9
_RANK_TOL = 1e-9


@dataclass(frozen=True)
class _Subspace:
    """The pivots' subspace V: its orthonormal basis (rows) and whether it is the
    complement of that basis ("avoid") or the basis's own span ("space")."""

    basis: np.ndarray  # (k, d), orthonormal rows; (0, d) for the whole space
    complement: bool

    @property
    def dim(self) -> int:
        d = int(self.basis.shape[1])
        k = int(self.basis.shape[0])
        return d - k if self.complement else k

    def project(self, embeddings: np.ndarray) -> np.ndarray:
        """The rows of ``embeddings`` projected on V."""
        inside = (embeddings @ self.basis.T) @ self.basis
        return embeddings - inside if self.complement else inside


@functools.lru_cache(maxsize=8)
def _subspace(law: PivotLaw, dim: int) -> _Subspace:
    """The subspace a pivot law draws its frames in (checked orthonormal for a space)."""
    rows = (
        np.frombuffer(law.directions, "<f8").reshape(law.rows, dim)
        if law.rows
        else np.zeros((0, dim))
    )
    if law.kind == "space":
        gram = rows @ rows.T
        if not np.allclose(gram, np.eye(law.rows), atol=1e-8):
            raise ValueError("a pivot space's basis must have orthonormal rows")
        return _Subspace(rows, complement=False)
    if law.rows:
        q, _ = np.linalg.qr(rows.T)  # the avoided directions, orthonormalised
        return _Subspace(np.ascontiguousarray(q.T), complement=True)
    return _Subspace(rows, complement=True)


def span_coordinates(embeddings: np.ndarray) -> np.ndarray:
    """Coordinates (n, r) of the rows of ``embeddings`` in an orthonormal basis of their
    span (r its numerical rank): every inner product with a vector is one with its
    coordinates in that basis."""
    if embeddings.shape[0] == 0:
        return np.zeros((0, 0))
    u, s, _ = np.linalg.svd(embeddings, full_matrices=False)
    keep = s > _RANK_TOL * s[0] if s.size and s[0] > 0 else np.zeros(s.shape, bool)
    return np.ascontiguousarray(u[:, keep] * s[keep])


def bartlett_wishart(
    rng: np.random.Generator, df: int, channels: int, size: tuple[int, ...]
) -> np.ndarray:
    """``size`` draws of Wishart_c(df, I), shape (*size, c, c): ``L L^T`` for Bartlett's lower
    triangular ``L`` (diagonal sqrt(chi-square(df - i)), normals below), or ``X^T X`` for
    Gaussian ``X`` (df, c) where df < c."""
    c = channels
    if df <= 0:
        return np.zeros((*size, c, c))
    if df < c:
        x = rng.standard_normal((*size, df, c))
        return np.einsum("...ki,...kj->...ij", x, x)
    lower = np.zeros((*size, c, c))
    for i in range(c):
        lower[..., i, i] = np.sqrt(2.0 * rng.standard_gamma((df - i) / 2.0, size=size))
        for j in range(i):
            lower[..., i, j] = rng.standard_normal(size)
    return np.einsum("...ik,...jk->...ij", lower, lower)


@dataclass(frozen=True)
class ProjectedNullCells:
    """The detector's ``count`` public null cell draws of one law, drawn per text in the
    text's own span (the module's doc); the counterpart of
    :class:`~samark.schemes.samark.cells.NullCellDraws` for a key whose ``null_draws`` is
    "projected"."""

    law: PivotLaw
    count: int
    dim: int
    cells: int
    channels: int
    seed: int

    #: drawn for each text as it is scored, never held (the detector's streamed path)
    streamed = True

    def signed(self, embeddings: np.ndarray) -> Iterator[np.ndarray]:
        """The text's flag-signed cosines to its own cell's pivots under every draw, in
        blocks (B, n, c) of draws, in order: the ``signed`` of the d-dimensional draws, in
        law. ``embeddings``: the text's unit sentence embeddings (n, d), n >= 1."""
        emb = np.asarray(embeddings, dtype=np.float64)
        if emb.ndim != 2 or emb.shape[0] == 0 or emb.shape[1] != self.dim:
            raise ValueError(f"a text's embeddings have shape (n >= 1, {self.dim})")
        space = _subspace(self.law, self.dim)
        anchor_coords = span_coordinates(emb)  # (n, rA)
        pivot_coords = span_coordinates(space.project(emb))  # (n, rP)
        free_anchor = self.dim - anchor_coords.shape[1]
        free_pivot = space.dim - pivot_coords.shape[1]
        if free_pivot + pivot_coords.shape[1] < self.channels:
            raise ValueError("the pivot law's space has fewer dimensions than channels")
        slots = min(emb.shape[0], self.cells)
        per_draw = (
            self.cells * anchor_coords.shape[1] + slots * pivot_coords.shape[1] * self.channels
        )
        block = max(1, min(_BLOCK, _BLOCK_ELEMENTS // max(1, per_draw)))
        for index, start in enumerate(range(0, self.count, block)):
            size = min(block, self.count - start)
            rng = np.random.default_rng(
                np.random.SeedSequence(
                    [
                        self.seed,
                        self.dim,
                        self.cells,
                        self.channels,
                        index,
                        anchor_coords.shape[1],
                        pivot_coords.shape[1],
                        0x9A0,
                    ]
                )
            )
            yield self._block(rng, size, anchor_coords, pivot_coords, free_anchor, free_pivot)

    def _block(
        self,
        rng: np.random.Generator,
        size: int,
        anchor_coords: np.ndarray,
        pivot_coords: np.ndarray,
        free_anchor: int,
        free_pivot: int,
    ) -> np.ndarray:
        n, r_anchor = anchor_coords.shape
        r_pivot = pivot_coords.shape[1]
        c, m = self.channels, self.cells
        # anchors: each sentence's cell, the argmax of its cosines to the M anchors
        z = rng.standard_normal((size, m, r_anchor), dtype=np.float32)
        tail = 2.0 * rng.standard_gamma(free_anchor / 2.0, size=(size, m)) if free_anchor else 0.0
        norms = np.sqrt(np.square(z).sum(axis=2, dtype=np.float64) + tail).astype(np.float32)
        cos = (z.reshape(size * m, r_anchor) @ anchor_coords.T.astype(np.float32)).reshape(
            size, m, n
        )
        cell = np.argmax(cos / norms[:, :, None], axis=1)  # (B, n)
        # one pivot set and flag pattern per slot, every distinct cell of a draw its own: with
        # fewer sentences than cells a sentence reads the slot of the first sentence in its
        # cell, else each cell has its slot
        if n <= m:
            slots = n
            slot = np.argmax(cell[:, :, None] == cell[:, None, :], axis=2)  # (B, n)
        else:
            slots, slot = m, cell
        gauss = rng.standard_normal((size, slots, r_pivot, c))
        gram = np.matmul(gauss.transpose(0, 1, 3, 2), gauss) + bartlett_wishart(
            rng, free_pivot, c, (size, slots)
        )
        flags = np.where(rng.integers(0, 2, size=(size, slots, c), dtype=np.int8) > 0, 1.0, -1.0)
        upper = np.linalg.cholesky(gram).transpose(0, 1, 3, 2)  # R, with R^T R = gram
        inverse = np.linalg.inv(upper)  # (B, n, c, c)
        rows = np.arange(size)[:, None]
        out = np.empty((size, n, c))
        step = max(1, _STEP_ELEMENTS // max(1, n * max(r_pivot, 1) * c))
        for lo in range(0, size, step):
            hi = min(size, lo + step)
            own = slot[lo:hi]
            picked = gauss[rows[lo:hi], own]  # (b, n, rP, c)
            raw = np.matmul(pivot_coords[None, :, None, :], picked)  # (b, n, 1, c)
            out[lo:hi] = np.matmul(raw, inverse[rows[lo:hi], own])[:, :, 0, :]
        return out * flags[rows, slot]
