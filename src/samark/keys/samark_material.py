"""A key's SAMark part: where its pivots are drawn, and the pivots themselves.

Every scheme's key is a :class:`samark.keys.WatermarkKey` (secret bytes, public id,
embedder). SAMark adds public geometry: the directions its pivots avoid (the embedder's
domain mean directions) or a shipped pivot space they are drawn in. :class:`PivotDraw` is
that public part, stored in the key file beside the secret, with the number of keyed
semantic cells the key's layered mark uses (``cells``: :mod:`samark.schemes.samark.cells`;
0, static pivots, for a key written before cells were the layered default);
``key.samark`` is a :class:`SAMarkKeyMaterial`, the draw bound to the key's secret: the
key's pivots, their public law and the detector's null pivots from that law.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

import numpy as np

from samark.errors import EmbedderMismatchError
from samark.keys.pivot_spaces import PivotSpace, SpaceRecord, load_pivot_space
from samark.keys.pivots import PivotLaw, derive_pivots, derive_pivots_in_space

#: the key file version of a key without a pivot space, and of one with (a samark that reads
#: only version 1 would ignore the space and derive other pivots, so it must refuse it)
FILE_VERSION = 1
FILE_VERSION_SPACE = 2
#: the version of a key that names its layered mark's keyed cells (a samark that reads only
#: versions 1-2 would detect that key's texts on static pivots and miss them, so it must
#: refuse it); such a key may also draw in a pivot space
FILE_VERSION_CELLS = 3
#: the version of a key with cells that is detected with null draws in each text's span
#: (``null_draws = "projected"``, :mod:`samark.schemes.samark.null_projection`): a samark
#: that reads only versions 1-3 would give its texts other p-values (the full draws'), so it
#: must refuse it (a key that names its scheme is version 4 too: ``samark.keys``)
FILE_VERSION_NULL_DRAWS = 4
#: the keyed semantic cells of a new key's layered mark (``samark keygen``, ``new_key``):
#: chosen by measurement (docs/results/2026-11-28-cells-64): 64 resist stealing far better
#: than 16, at the same power within a text on the paper protocol
DEFAULT_CELLS = 64
#: the null draws a new key with cells is detected with: "projected", the full draws' exact
#: law in each text's span, seconds for a 64-key ring instead of minutes
#: (docs/results/2026-11-28-cost); keys written before keep "full"
DEFAULT_NULL_DRAWS = "projected"
#: the null draws a key is detected with: "full", d-dimensional cell sets
#: (:class:`~samark.schemes.samark.cells.NullCellDraws`, every key written before
#: 2026-11-28), or "projected", their law in each text's span
#: (:mod:`samark.schemes.samark.null_projection`)
NULL_DRAWS = ("full", "projected")


def new_null_draws(cells: int, null_draws: str | None = None) -> str:
    """The null draws a new key with ``cells`` names: ``null_draws`` if given, else the
    default for keyed cells ("full" for static pivots, which have no cells to draw)."""
    if null_draws is not None:
        return null_draws
    return DEFAULT_NULL_DRAWS if cells else "full"


def check_cells(cells: object) -> int:
    """``cells`` if it is a count of keyed cells (0: static pivots, or at least 2: one cell
    is static pivots by another name); ValueError otherwise."""
    if type(cells) is not int or cells < 0 or cells == 1:
        raise ValueError(f"cells must be 0 (static pivots) or at least 2, got {cells!r}")
    return cells


class AvoidRecord(TypedDict):
    """A key file's avoided directions: rows x dim float64, little-endian, base64."""

    rows: int
    dim: int
    float64_le: str


class DrawRecord(TypedDict):
    """:meth:`PivotDraw.to_record`: the key file's fields for a draw."""

    avoid: AvoidRecord
    space: NotRequired[SpaceRecord]
    cells: NotRequired[int]
    null_draws: NotRequired[str]


@dataclass(frozen=True, eq=False)
class PivotDraw:
    """Where a key's pivots are drawn (public): Haar-random away from ``avoid`` (rows; may
    have none) or, with ``space``, Haar-random in that pivot space; and ``cells``, the keyed
    semantic cells its layered mark (``samark-layered``) uses unless told otherwise (0:
    the paper's static pivots). The paper's ``samark`` scheme ignores ``cells``. With cells,
    ``null_draws`` says which public null draws its texts are detected against: "full"
    (every key written before 2026-11-28) or "projected" (their law in each text's span:
    :mod:`samark.schemes.samark.null_projection`)."""

    avoid: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)), repr=False)
    space: PivotSpace | None = None
    cells: int = 0
    null_draws: str = "full"

    def __post_init__(self) -> None:
        check_cells(self.cells)
        if self.null_draws not in NULL_DRAWS:
            raise ValueError(f"null_draws must be one of {NULL_DRAWS}, got {self.null_draws!r}")
        if self.null_draws != "full" and not self.cells:
            raise ValueError("null_draws other than 'full' are for a key with keyed cells")
        avoid = np.asarray(self.avoid, dtype=np.float64)
        if avoid.size == 0:
            avoid = np.zeros((0, 0))
        elif avoid.ndim != 2:
            raise ValueError(f"avoided directions are rows (n, dim), got shape {avoid.shape}")
        object.__setattr__(self, "avoid", avoid)
        if self.space is not None and avoid.size:
            raise ValueError(
                "a key draws its pivots either in a pivot space or away from avoided "
                "directions, not both"
            )

    @classmethod
    def avoiding(
        cls, avoid: np.ndarray | None, cells: int = 0, null_draws: str = "full"
    ) -> PivotDraw:
        """Pivots orthogonal to the rows of ``avoid`` (``None``: anywhere)."""
        return cls(np.zeros((0, 0)) if avoid is None else avoid, cells=cells, null_draws=null_draws)

    @classmethod
    def in_space(cls, space: PivotSpace, cells: int = 0, null_draws: str = "full") -> PivotDraw:
        return cls(space=space, cells=cells, null_draws=null_draws)

    @property
    def file_version(self) -> int:
        """The key file version a key with this draw is written as (the oldest that says
        all of it, so that older keys are written as they always were)."""
        if self.null_draws != "full":
            return FILE_VERSION_NULL_DRAWS
        if self.cells:
            return FILE_VERSION_CELLS
        return FILE_VERSION if self.space is None else FILE_VERSION_SPACE

    @property
    def id_part(self) -> bytes:
        """What the draw adds to the key id: a key in a pivot space has other pivots, so
        another id; nothing otherwise (the avoided directions leave the id as it was)."""
        return b"" if self.space is None else f"/space/{self.space.sha256}".encode()

    def to_record(self) -> DrawRecord:
        """The key file's fields for the draw (``avoid`` always, ``space``, ``cells`` and
        ``null_draws`` if any)."""
        record: DrawRecord = {
            "avoid": {
                "rows": int(self.avoid.shape[0]),
                "dim": int(self.avoid.shape[1]) if self.avoid.size else 0,
                "float64_le": base64.b64encode(self.avoid.astype("<f8").tobytes()).decode("ascii"),
            }
        }
        if self.space is not None:
            record["space"] = self.space.to_record()
        if self.cells:
            record["cells"] = self.cells
        if self.null_draws != "full":
            record["null_draws"] = self.null_draws
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, object], fingerprint: str) -> PivotDraw:
        """The draw a key file's ``record`` stores, for a key of the embedder with
        ``fingerprint``. Raises ``KeyError``/``TypeError``/``ValueError`` on a damaged
        record and :class:`~samark.keys.pivot_spaces.UnknownPivotSpaceError` for
        a space this samark does not ship."""
        avoid_rec = record.get("avoid") or {"rows": 0, "dim": 0, "float64_le": ""}
        if not isinstance(avoid_rec, dict):
            raise TypeError("a key file's avoided directions are an object")
        flat = np.frombuffer(base64.b64decode(avoid_rec["float64_le"], validate=True), "<f8")
        rows, dim = int(avoid_rec["rows"]), int(avoid_rec["dim"])
        space_rec = record.get("space")
        space = None
        if space_rec is not None:
            if not isinstance(space_rec, dict):
                raise TypeError("a key file's pivot space is an object")
            space = load_pivot_space(
                str(space_rec["name"]), fingerprint=fingerprint, sha256=str(space_rec["sha256"])
            )
        avoid = flat.reshape(rows, dim) if rows else np.zeros((0, 0))
        cells = check_cells(record.get("cells", 0))
        return cls(avoid, space, cells, str(record.get("null_draws", "full")))


class SAMarkKeyMaterial:
    """A key's SAMark part (``key.samark``): its :class:`PivotDraw` bound to the key's
    secret. Its repr shows only the public draw; it cannot be pickled."""

    __slots__ = ("_secret", "draw")

    def __init__(self, secret: bytes, draw: PivotDraw) -> None:
        self._secret = secret
        self.draw = draw

    @property
    def avoid(self) -> np.ndarray:
        """The public directions (rows) the pivots are orthogonal to; may have no rows."""
        return self.draw.avoid

    @property
    def space(self) -> PivotSpace | None:
        """The public subspace the pivots are drawn in (then no avoided directions)."""
        return self.draw.space

    @property
    def cells(self) -> int:
        """The keyed semantic cells the key's layered mark uses by default (0: static)."""
        return self.draw.cells

    @property
    def null_draws(self) -> str:
        """The null draws the key's cells are detected against ("full" or "projected")."""
        return self.draw.null_draws

    def __repr__(self) -> str:
        where = f"space={self.space.name!r}" if self.space else f"avoid={self.avoid.shape[0]}"
        return f"SAMarkKeyMaterial({where}, cells={self.cells}, null_draws={self.null_draws!r})"

    def __reduce__(self) -> None:  # type: ignore[override]
        raise TypeError("a key's SAMark material is not picklable; pass the key file path")

    def pivots(self, dim: int, channels: int) -> np.ndarray:
        """The ``channels`` orthonormal pivot vectors in R^dim, shape ``(channels, dim)``."""
        if self.space is not None:
            self._check_space(dim)
            return derive_pivots_in_space(self._secret, self.space.basis, channels)
        return derive_pivots(self._secret, dim, channels, self.avoid_for(dim))

    def pivot_law(self, dim: int) -> PivotLaw:
        """The public law the pivots are drawn from, in R^dim: what the detector's null
        pivots must follow."""
        if self.space is not None:
            self._check_space(dim)
            return PivotLaw.of("space", self.space.basis)
        return PivotLaw.of("avoid", self.avoid_for(dim))

    def null_pivots(self, count: int, dim: int, channels: int, seed: int) -> np.ndarray:
        """``count`` public pivot sets from the key's law (the detector's exchangeable
        stand-ins), shape ``(count, channels, dim)``."""
        return self.pivot_law(dim).null_pivots(count, dim, channels, seed)

    def avoid_for(self, dim: int) -> np.ndarray | None:
        """The avoided directions if they live in R^dim (else ``None``)."""
        if self.avoid.size == 0:
            return None
        if self.avoid.shape[1] != dim:
            raise EmbedderMismatchError(
                f"this key's avoided directions are {self.avoid.shape[1]}-d, "
                f"but the embedder is {dim}-d"
            )
        return self.avoid

    def _check_space(self, dim: int) -> None:
        assert self.space is not None
        if self.space.dim != dim:
            raise EmbedderMismatchError(
                f"this key's pivot space is {self.space.dim}-d, but the embedder is {dim}-d"
            )
