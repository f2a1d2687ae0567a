"""Pivot spaces: public subspaces of an embedder's space that keys draw their pivots in.

A text's sentences share a topic, so along a random direction v the mean embedding m of a
human text has a spread that barely falls with length; that spread is the noise SAMark's
evidence must beat. What the generator can choose from is the spread of a step's
candidates around their mean. Both vary with the direction: some directions separate
documents (topic, domain), others separate sentences within a document. A pivot space is
spanned by the ``rank`` directions where sentences vary most relative to documents' means:
the top generalised eigenvectors of

    within = E[(e - m)(e - m)^T]   against   between = E[m m^T]

over documents of human text (e a sentence embedding, m its document's mean). Domain means
live mostly in ``between``, so pivots drawn in the space also lean little towards any
domain's mean direction.

A key with a pivot space draws its pivots Haar-random in it, and the detector draws its null
pivots from the same law, so the p-value stays exact whatever the space. Spaces are public,
named, shipped files (``samark/resources/pivot_spaces``, built by
``scripts/build_pivot_spaces.py``); a key file names its space and the space's SHA-256, so
a key never silently changes its pivots.

Fitting a space to human text is SAMark's, above the keys
(:mod:`samark.schemes.samark.pivot_space_fitting`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from typing import TypedDict

import numpy as np

from samark.errors import SamarkError

_INDEX = "resources/pivot_spaces.json"


class UnknownPivotSpaceError(SamarkError, KeyError):
    """No shipped pivot space has this name (or it is not the one a key was made with)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True, eq=False)
class PivotSpace:
    """A named public subspace (rows of ``basis``, shape ``(rank, dim)``) pivots live in."""

    name: str
    basis: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        basis = np.asarray(self.basis, dtype=np.float64)
        if basis.ndim != 2 or not 1 <= basis.shape[0] <= basis.shape[1]:
            raise ValueError(
                f"a pivot space basis is (rank, dim) with rank <= dim, got {basis.shape}"
            )
        if not np.all(np.isfinite(basis)):
            raise ValueError("a pivot space basis must be finite")
        basis.setflags(write=False)
        object.__setattr__(self, "basis", basis)

    @property
    def rank(self) -> int:
        return int(self.basis.shape[0])

    @property
    def dim(self) -> int:
        return int(self.basis.shape[1])

    @property
    def sha256(self) -> str:
        """Hash of the basis as little-endian float64: what a key file pins."""
        return hashlib.sha256(self.basis.astype("<f8").tobytes()).hexdigest()

    def to_record(self) -> SpaceRecord:
        """What a key file stores: the name and hash, never the (shipped) basis."""
        return {"name": self.name, "rank": self.rank, "dim": self.dim, "sha256": self.sha256}


class SpaceRecord(TypedDict):
    """:meth:`PivotSpace.to_record`: a key file's pivot space (name and hash)."""

    name: str
    rank: int
    dim: int
    sha256: str


class ShippedSpace(TypedDict):
    """One entry of the shipped index (``resources/pivot_spaces.json``): the embedder
    (preset and fingerprint) a space belongs to, its rank, file, hash and sources."""

    embedder: str
    fingerprint: str
    rank: int
    file: str
    sha256: str
    sources: dict[str, str]


def _index() -> dict[str, ShippedSpace]:
    path = resources.files("samark").joinpath(_INDEX)
    if not path.is_file():
        return {}
    table: dict[str, ShippedSpace] = json.loads(path.read_text())  # shipped with samark
    return table


def shipped_pivot_spaces(embedder: str | None = None) -> dict[str, ShippedSpace]:
    """Name -> description (embedder, fingerprint, rank, sources) of every shipped space,
    optionally only those of one embedder preset."""
    return {
        name: entry
        for name, entry in _index().items()
        if embedder is None or entry["embedder"] == embedder
    }


def load_pivot_space(
    name: str, *, fingerprint: str | None = None, sha256: str | None = None
) -> PivotSpace:
    """The shipped space ``name``. With ``fingerprint``, it must belong to that embedder;
    with ``sha256``, its basis must be exactly the one a key was made with."""
    entry = _index().get(name)
    if entry is None:
        known = ", ".join(sorted(_index())) or "none"
        raise UnknownPivotSpaceError(
            f"no pivot space named {name!r} ships with samark (known: {known})"
        )
    if fingerprint is not None and entry["fingerprint"] != fingerprint:
        raise UnknownPivotSpaceError(
            f"pivot space {name!r} belongs to embedder {entry['embedder']!r} "
            f"(fingerprint {entry['fingerprint'][:12]}), not to this one ({fingerprint[:12]})"
        )
    data = resources.files("samark").joinpath(f"resources/pivot_spaces/{entry['file']}")
    with data.open("rb") as f:
        basis = np.load(f, allow_pickle=False)
    space = PivotSpace(name, basis.astype(np.float64))
    if sha256 is not None and space.sha256 != sha256:
        raise UnknownPivotSpaceError(
            f"pivot space {name!r} shipped here (sha256 {space.sha256[:12]}) is not the one "
            f"the key was made with ({sha256[:12]}); use the samark version that made the key"
        )
    return space
