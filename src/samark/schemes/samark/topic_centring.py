"""Topic centring: subtract from a text's sentence embeddings the mean of the public human
texts nearest to it, before any pivot sees them.

Why: a key's false-positive rate on one domain of human text is not its average over keys.
Every text of a domain shares the domain's mean direction (and its sub-topics' directions),
so a key whose pivots lean towards them shifts all of that domain's texts at once
(docs/statistics.md, "Per-key false positives"). Centring each text by the mean of its
``k`` nearest neighbours in a reference set of human texts removes the shared part that the
reference covers, and leaves what a key's mark adds: the neighbours are human texts that
never saw the key, chosen by similarity over the whole space, in which a mark's shift along
c pivots is a small part.

The p-value stays exact: centring is a function of the text and public data only, applied
alike under the key's pivots and every null pivot set, so the key's statistic is still
exchangeable with the nulls' under H0.

What it buys depends on the reference (measured in docs/statistics.md, "Per-key false
positives on many domains"): with the operator's own human text of a domain as the
reference, each key holds its rate on that domain; a public reference of other genres does
not carry over to a domain it lacks and costs power. So samark ships no default reference:
an operator builds one from her own traffic (``samark centring build``) and detects with
it (``--centring FILE``). Generation is unchanged: centring is a detection setting, like
the statistic.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from samark.errors import SamarkError

if TYPE_CHECKING:
    from samark.embed import Embedder

CENTRING_FORMAT = "samark-centring"
CENTRING_VERSION = 1
#: neighbours per text: the per-key benchmark's best count with 200-300 reference texts
#: of the domain (docs/statistics.md)
DEFAULT_NEIGHBOURS = 32


@dataclass(frozen=True, eq=False)
class NeighbourCentring:
    """Centring by the mean of the ``k`` nearest reference texts (cosine of text means).

    ``means``: one row per reference human text, the mean of its unit sentence embeddings
    (not renormalised), shape (R, dim)."""

    name: str
    means: np.ndarray = field(repr=False)
    k: int = DEFAULT_NEIGHBOURS
    #: the fingerprint of the embedder the means come from ("" when not known)
    fingerprint: str = ""
    _unit: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        means = np.asarray(self.means, dtype=np.float64)
        if means.ndim != 2 or means.shape[0] < 1:
            raise ValueError(f"reference means are (texts, dim), got {means.shape}")
        if not 1 <= self.k <= means.shape[0]:
            raise ValueError(f"k must be in [1, {means.shape[0]}], got {self.k}")
        means.setflags(write=False)
        object.__setattr__(self, "means", means)
        unit = means / np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-12)
        unit.setflags(write=False)
        object.__setattr__(self, "_unit", unit)

    @property
    def dim(self) -> int:
        return int(self.means.shape[1])

    @property
    def sha256(self) -> str:
        """Hash of the reference (little-endian float64 means) and k: what a key pins."""
        digest = hashlib.sha256(self.means.astype("<f8").tobytes())
        digest.update(f"/k={self.k}".encode())
        return digest.hexdigest()

    def offset(self, embeddings: np.ndarray) -> np.ndarray:
        """The vector subtracted from each sentence of this text, shape (dim,)."""
        mean = embeddings.mean(axis=0)
        sims = self._unit @ (mean / max(float(np.linalg.norm(mean)), 1e-12))
        nearest = np.argpartition(-sims, self.k - 1)[: self.k]
        return np.asarray(self.means[nearest].mean(axis=0))

    def __call__(self, embeddings: np.ndarray) -> np.ndarray:
        """The text's sentence embeddings (n, dim) less its neighbours' mean."""
        if embeddings.ndim != 2 or embeddings.shape[1] != self.dim:
            raise ValueError(f"expected (n, {self.dim}) embeddings, got {embeddings.shape}")
        return embeddings - self.offset(embeddings)[None, :]

    @classmethod
    def from_texts(
        cls,
        embedder: Embedder,
        texts: Sequence[Sequence[str]],
        *,
        k: int = DEFAULT_NEIGHBOURS,
        name: str = "reference",
    ) -> NeighbourCentring:
        """A reference from human texts (each a list of sentences, at least 3 texts more
        than ``k``): one embedding call over every sentence."""
        texts = [list(t) for t in texts if len(t) > 0]
        if len(texts) <= k:
            raise SamarkError(f"a reference needs more than k = {k} texts, got {len(texts)}")
        flat = embedder.encode([s for t in texts for s in t])
        bounds = np.cumsum([0, *map(len, texts)])
        means = np.array([flat[bounds[i] : bounds[i + 1]].mean(axis=0) for i in range(len(texts))])
        # stored as float32: the hash is of what a load gives back
        return cls(name, means.astype(np.float32), k, embedder.identity.fingerprint)

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Write the reference (.npz: the means as float32 and a JSON header). Not a
        secret: means of human text, and no key."""
        path = Path(path)
        if path.exists() and not overwrite:
            raise SamarkError(f"{path} exists; refusing to overwrite it")
        meta = {
            "format": CENTRING_FORMAT,
            "version": CENTRING_VERSION,
            "name": self.name,
            "k": self.k,
            "fingerprint": self.fingerprint,
            "texts": int(self.means.shape[0]),
            "sha256": self.sha256,
        }
        buffer = io.BytesIO()
        np.savez(buffer, means=self.means.astype(np.float32), meta=np.array(json.dumps(meta)))
        path.write_bytes(buffer.getvalue())
        return path

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], *, fingerprint: str | None = None
    ) -> NeighbourCentring:
        """Read a reference file; with ``fingerprint``, it must come from that embedder."""
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as data:
                meta = json.loads(str(data["meta"]))
                means = data["means"].astype(np.float64)
        except FileNotFoundError:
            raise SamarkError(f"centring reference {path} does not exist") from None
        except (OSError, ValueError, KeyError):
            raise SamarkError(f"{path} is not a samark centring reference") from None
        if not isinstance(meta, dict) or meta.get("format") != CENTRING_FORMAT:
            raise SamarkError(f"{path} is not a samark centring reference")
        if meta.get("version") != CENTRING_VERSION:
            raise SamarkError(
                f"{path} has centring format version {meta.get('version')!r}; "
                f"this samark reads version {CENTRING_VERSION}"
            )
        ref = cls(str(meta["name"]), means, int(meta["k"]), str(meta["fingerprint"]))
        if ref.sha256 != meta.get("sha256"):
            raise SamarkError(f"{path} is a damaged centring reference (hash does not match)")
        if fingerprint is not None and ref.fingerprint != fingerprint:
            raise SamarkError(
                f"centring reference {path} was built with another embedder "
                f"(fingerprint {ref.fingerprint[:12]}, this one {fingerprint[:12]})"
            )
        return ref


#: the public reference the per-key benchmark measures (not shipped: it does not carry over
#: to domains it lacks, docs/statistics.md), none of it scored by the calibration tests or
#: the benchmark: name -> (dataset, documents, sentences a text, texts a document:
#: consecutive windows from its start)
REFERENCE_SOURCES: dict[str, tuple[str, slice, int, int]] = {
    "encyclopedic": ("wikipedia_leads", slice(6000, 7000), 6, 1),
    "fiction": ("jane_austen", slice(200, None), 6, 4),
    "technical": ("python_docs", slice(0, None, 4), 6, 1),
}


def reference_texts(
    sources: dict[str, tuple[str, slice, int, int]] | None = None,
) -> dict[str, list[list[str]]]:
    """The reference's texts per source, as lists of sentences (at least 3 each)."""
    from samark.datasets import load_dataset
    from samark.segment import split_sentences

    out: dict[str, list[list[str]]] = {}
    for name, (dataset, docs, size, per_doc) in (sources or REFERENCE_SOURCES).items():
        texts: list[list[str]] = []
        for doc in load_dataset(dataset)[docs]:
            sents = split_sentences(doc.text)
            windows = (sents[i * size : (i + 1) * size] for i in range(per_doc))
            texts.extend(w for w in windows if len(w) >= 3)
        out[name] = texts
    return out
