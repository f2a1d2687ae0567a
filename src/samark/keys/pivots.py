"""SAMark's pivot geometry: the secret's orthonormal pivots, their public law, and the null
pivots the detector ranks them against.

Pivots are derived with operations that IEEE 754 rounds exactly (``+ - * /``, ``sqrt``,
``math.fsum``) from a SHAKE-256 stream, so the same key gives bit-identical pivots on every
machine and Python version (no libm ``log``/``cos``, no BLAS, no numpy stream):

1. uniforms ``(k + 0.5) / 2**53`` from 53-bit words of ``SHAKE256(domain || secret || d || c)``;
2. standard normals by Marsaglia's polar method, with a series logarithm of our own;
3. a ``d x c`` Gaussian matrix orthonormalised by Gram-Schmidt (twice), i.e. the Q factor of
   its QR decomposition with a positive diagonal in R -- a Haar-random orthonormal frame --
   after projecting out the key's public *avoided directions* (the embedder's domain mean
   directions, see ``scripts/build_reference_directions.py``), so that the frame is
   Haar-random in their orthogonal complement. The null pivots of the detector follow the
   same law, which keeps the p-value exact.

A key may instead name a public *pivot space* (``pivot_spaces``): its pivots are then
the Gram-Schmidt frame of ``basis^T g`` for a Gaussian ``g`` in the space's coordinates,
i.e. Haar-random in the space, and the detector's null pivots follow the same map.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

_PIVOT_DOMAIN = b"samark/pivots/v1"
_SPACE_PIVOT_DOMAIN = b"samark/pivots-in-space/v1"
_LN2 = 0.6931471805599453
_SQRT_HALF = 0.7071067811865476


def _ln(x: float) -> float:
    """Natural log for 0 < x < 1 with exactly-rounded operations only (no libm)."""
    m, e = math.frexp(x)  # x = m * 2**e, 0.5 <= m < 1
    if m < _SQRT_HALF:
        m *= 2.0
        e -= 1
    s = (m - 1.0) / (m + 1.0)  # |s| <= 0.1716
    s2 = s * s
    term = s
    total = 0.0
    for k in range(1, 40, 2):  # 20 terms: s**41 < 1e-31
        total += term / k
        term *= s2
    return 2.0 * total + e * _LN2


def _uniforms(seed: bytes) -> Iterator[float]:
    """Open-interval uniforms with 53 random bits each, from a SHAKE-256 stream."""
    block = 8 * 1024
    offset = 0
    stream = hashlib.shake_256(seed)
    while True:
        chunk = stream.digest(offset + block)[offset:]
        offset += block
        for i in range(0, block, 8):
            k = int.from_bytes(chunk[i : i + 8], "big") >> 11
            yield (k + 0.5) / 9007199254740992.0  # 2**53


def _normals(seed: bytes) -> Iterator[float]:
    """Standard normals by Marsaglia's polar method."""
    uni = _uniforms(seed)
    while True:
        u = 2.0 * next(uni) - 1.0
        v = 2.0 * next(uni) - 1.0
        s = u * u + v * v
        if 0.0 < s < 1.0:
            f = math.sqrt(-2.0 * _ln(s) / s)
            yield u * f
            yield v * f


def _orthonormalise(vectors: list[list[float]], against: list[list[float]]) -> list[list[float]]:
    """Gram-Schmidt (twice) of ``vectors`` in order, orthogonal to ``against`` too."""
    basis = list(against)
    out: list[list[float]] = []
    for vec in vectors:
        col = list(vec)
        for _ in range(2):
            for q in basis:
                proj = math.fsum(a * b for a, b in zip(col, q, strict=True))
                col = [a - proj * b for a, b in zip(col, q, strict=True)]
        norm = math.sqrt(math.fsum(a * a for a in col))
        if norm < 1e-9:
            raise ValueError("directions are linearly dependent")
        unit = [a / norm for a in col]
        basis.append(unit)
        out.append(unit)
    return out


def derive_pivots(
    secret: bytes, dim: int, channels: int, avoid: np.ndarray | None = None
) -> np.ndarray:
    """Bit-reproducible Haar-random orthonormal pivots, shape ``(channels, dim)``,
    orthogonal to the rows of ``avoid``."""
    n_avoid = 0 if avoid is None else avoid.shape[0]
    if channels < 1 or dim < channels + n_avoid:
        raise ValueError(f"need 1 <= channels <= dim - avoided, got {channels=}, {dim=}")
    seed = _PIVOT_DOMAIN + secret + dim.to_bytes(4, "big") + channels.to_bytes(4, "big")
    gauss = _normals(seed)
    columns = [[next(gauss) for _ in range(dim)] for _ in range(channels)]
    avoided = []
    if avoid is not None and n_avoid:
        avoided = _orthonormalise([[float(x) for x in row] for row in avoid], [])
    return np.array(_orthonormalise(columns, avoided), dtype=np.float64)


@dataclass(frozen=True)
class PivotLaw:
    """A key's public pivot law as plain, hashable values (so null pivots can be cached
    by it): ``kind`` "avoid" (Haar orthogonal to ``rows`` directions; none: Haar in the
    whole space) or "space" (Haar in the row space of ``rows`` basis vectors), the rows
    as little-endian float64 bytes."""

    kind: str
    rows: int
    directions: bytes

    @classmethod
    def of(cls, kind: str, matrix: np.ndarray | None) -> PivotLaw:
        if matrix is None or not matrix.size:
            return cls(kind, 0, b"")
        return cls(kind, int(matrix.shape[0]), matrix.astype("<f8").tobytes())

    def null_pivots(self, count: int, dim: int, channels: int, seed: int) -> np.ndarray:
        """``count`` pivot sets drawn from this law, shape ``(count, channels, dim)``."""
        matrix = (
            np.frombuffer(self.directions, "<f8").reshape(self.rows, dim) if self.rows else None
        )
        if self.kind == "space":
            assert matrix is not None
            return null_pivots_in_space(count, matrix, channels, seed)
        return null_pivots(count, dim, channels, seed, matrix)


def derive_pivots_in_space(secret: bytes, basis: np.ndarray, channels: int) -> np.ndarray:
    """Bit-reproducible pivots Haar-random in the row space of ``basis`` (rank, dim):
    Gram-Schmidt of ``basis^T g`` for standard normal coordinates ``g``, shape
    ``(channels, dim)``."""
    rank, dim = basis.shape
    if not 1 <= channels <= rank:
        raise ValueError(f"need 1 <= channels <= the space's rank, got {channels=}, {rank=}")
    seed = _SPACE_PIVOT_DOMAIN + secret + rank.to_bytes(4, "big") + channels.to_bytes(4, "big")
    gauss = _normals(seed)
    rows = [[float(x) for x in row] for row in basis]
    columns = []
    for _ in range(channels):
        coords = [next(gauss) for _ in range(rank)]
        columns.append(
            [math.fsum(c * row[i] for c, row in zip(coords, rows, strict=True)) for i in range(dim)]
        )
    return np.array(_orthonormalise(columns, []), dtype=np.float64)


def null_pivots_in_space(count: int, basis: np.ndarray, channels: int, seed: int) -> np.ndarray:
    """``count`` public pivot sets from the law of :func:`derive_pivots_in_space`, shape
    ``(count, channels, dim)``."""
    rank, dim = basis.shape
    rng = np.random.default_rng(np.random.SeedSequence([seed, dim, channels, rank, 0x5A4E]))
    gauss = basis.T @ rng.standard_normal((count, rank, channels))  # (count, dim, channels)
    q, r = np.linalg.qr(gauss)
    signs = np.sign(np.diagonal(r, axis1=1, axis2=2))
    signs[signs == 0] = 1.0
    return np.ascontiguousarray(np.transpose(q * signs[:, None, :], (0, 2, 1)))


def null_pivots(
    count: int, dim: int, channels: int, seed: int, avoid: np.ndarray | None = None
) -> np.ndarray:
    """``count`` public random pivot sets from the keys' law, shape ``(count, channels, dim)``:
    Haar-random frames orthogonal to the rows of ``avoid``.

    They serve as exchangeable stand-ins for the secret key in the detector's p-value.
    """
    rng = np.random.default_rng(np.random.SeedSequence([seed, dim, channels, 0x5A4D]))
    gauss = rng.standard_normal((count, dim, channels))
    if avoid is not None and avoid.shape[0]:
        q_avoid, _ = np.linalg.qr(avoid.T)  # (dim, m)
        gauss = gauss - q_avoid @ (q_avoid.T @ gauss)
    q, r = np.linalg.qr(gauss)
    signs = np.sign(np.diagonal(r, axis1=1, axis2=2))
    signs[signs == 0] = 1.0
    return np.ascontiguousarray(np.transpose(q * signs[:, None, :], (0, 2, 1)))
