"""Sentence embedders: sentence-transformers models, loaded once per process."""

from __future__ import annotations

import contextlib
import functools
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from importlib import resources
from typing import TypedDict

import numpy as np

from samark.errors import SamarkError
from samark.keys import EmbedderIdentity, WatermarkKey
from samark.keys.samark_material import DEFAULT_CELLS, PivotDraw, new_null_draws
from samark.models import DEFAULT_EMBEDDER, folder_fingerprint, resolve_device, resolve_embedder

#: the domains whose mean directions a new key's pivots avoid: a key whose pivots lean
#: towards a domain's mean shifts every text of that domain (docs/statistics.md)
AVOIDED_DOMAINS = ("news", "wiki", "fiction")
#: what keys avoided before the fiction direction shipped (2026-11-24): experiments keep
#: it unless they name others, so that committed public-key runs keep their keys
LEGACY_AVOIDED_DOMAINS = ("news", "wiki")


class _ThreadMemo(threading.local):
    """One thread's remembered sentences (None outside ``Embedder.remembering``)."""

    memo: dict[str, np.ndarray] | None = None


class Embedder:
    """Unit-norm sentence embeddings from a sentence-transformers model, with an identity
    (name + hash of its files) that keys record."""

    def __init__(
        self,
        name_or_path: str = DEFAULT_EMBEDDER,
        *,
        batch_size: int = 64,
        device: str | None = None,
    ) -> None:
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()

        self.name, self.path = resolve_embedder(name_or_path)
        #: where the model runs (:func:`samark.models.resolve_device`: a GPU when torch sees
        #: one); embeddings agree across devices to float rounding
        self.device = resolve_device(device)
        self._model = SentenceTransformer(str(self.path), device=self.device, local_files_only=True)
        self.batch_size = batch_size
        #: show a progress bar (stderr) when one call embeds at least this many sentences
        self.progress_over: int | None = None
        dim = (
            self._model.get_embedding_dimension()
            if hasattr(self._model, "get_embedding_dimension")
            else self._model.get_sentence_embedding_dimension()
        )
        if dim is None:
            raise ValueError(f"{self.name}: the model reports no embedding dimension")
        self.dim = int(dim)
        self._identity: EmbedderIdentity | None = None
        self._lock = threading.Lock()
        # remembered sentences (``remembering``), per thread: a block in one thread (a
        # server's detection) never changes what another thread's calls return
        self._local = _ThreadMemo()

    @property
    def identity(self) -> EmbedderIdentity:
        if self._identity is None:
            self._identity = EmbedderIdentity(self.name, folder_fingerprint(self.path))
        return self._identity

    def reference_directions(self, domains: Sequence[str] | None = None) -> np.ndarray | None:
        """The public mean directions of ``domains`` (rows, in that order) that keys'
        pivots avoid; ``None`` when no domain is asked for or none ships for this embedder
        (see scripts/build_reference_directions.py). Default: ``AVOIDED_DOMAINS``."""
        wanted = AVOIDED_DOMAINS if domains is None else tuple(domains)
        entry = _reference_table().get(self.name)
        if not wanted or not entry or entry["fingerprint"] != self.identity.fingerprint:
            return None
        shipped = list(entry["domains"])
        missing = [d for d in wanted if d not in shipped]
        if missing or len(set(wanted)) != len(wanted):
            raise SamarkError(
                f"avoided domains must be distinct names among {shipped} for {self.name}, "
                f"got {list(wanted)}"
            )
        return np.array([entry["directions"][shipped.index(d)] for d in wanted], dtype=np.float64)

    @contextlib.contextmanager
    def remembering(self, known: Mapping[str, np.ndarray] | None = None) -> Iterator[None]:
        """Within the block (in this thread), a sentence seen before is not embedded again
        (its earlier vector is returned). For work that re-scores the same sentences, such as the
        prefixes of a text; outside it, every call embeds afresh, so that what a call
        returns never depends on what was embedded before it. ``known``: vectors of this
        embedder already at hand (a corpus embedded once and stored), used as if seen."""
        if known and any(np.shape(v) != (self.dim,) for v in known.values()):
            raise ValueError(f"known vectors must have this embedder's dimension {self.dim}")
        outer = self._memo
        if outer is None:
            self._local.memo = {}
        if known:
            assert self._memo is not None
            self._memo.update(known)
        try:
            yield
        finally:
            if outer is None:
                self._local.memo = None

    @property
    def _memo(self) -> dict[str, np.ndarray] | None:
        """This thread's remembered sentences, or None outside ``remembering``."""
        return self._local.memo

    def encode(self, sentences: list[str]) -> np.ndarray:
        """Embeddings of ``sentences``, shape ``(len, dim)``, float64, unit L2 norm."""
        if not sentences:
            return np.zeros((0, self.dim))
        memo = self._memo
        if memo is not None:
            new = list(dict.fromkeys(s for s in sentences if s not in memo))
            if new:
                memo.update(zip(new, self._encode(new), strict=True))
            return np.stack([memo[s] for s in sentences])
        return self._encode(sentences)

    def _encode(self, sentences: list[str]) -> np.ndarray:
        with self._lock:
            out = self._model.encode(
                sentences,
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=(
                    self.progress_over is not None and len(sentences) >= self.progress_over
                ),
            )
        emb = np.asarray(out, dtype=np.float64)
        return emb / np.linalg.norm(emb, axis=1, keepdims=True).clip(min=1e-12)

    def __repr__(self) -> str:
        return f"Embedder(name={self.name!r}, dim={self.dim})"


@functools.lru_cache(maxsize=4)
def load_embedder(name_or_path: str = DEFAULT_EMBEDDER) -> Embedder:
    """The process-wide embedder for ``name_or_path`` (loaded on first use)."""
    return Embedder(name_or_path)


def new_key(
    embedder: Embedder,
    domains: Sequence[str] | None = None,
    cells: int | None = None,
    null_draws: str | None = None,
    scheme: str | None = None,
) -> WatermarkKey:
    """A fresh secret key for ``embedder`` whose pivots avoid the mean directions of
    ``domains`` (default ``AVOIDED_DOMAINS``), naming ``cells`` keyed semantic cells for its
    layered mark (default ``DEFAULT_CELLS``, 64; 0: the paper's static pivots), detected
    against ``null_draws`` (default: ``DEFAULT_NULL_DRAWS`` with cells; "full" matches the
    keys of a ring written before 2026-11-28), made for ``scheme`` (written in the key file;
    None: a key that names none, read as made for samark-layered where it has cells)."""
    cells = DEFAULT_CELLS if cells is None else cells
    return WatermarkKey.generate(
        embedder.identity,
        PivotDraw.avoiding(
            embedder.reference_directions(domains), cells, new_null_draws(cells, null_draws)
        ),
        scheme,
    )


class ReferenceDirections(TypedDict):
    """One embedder's shipped reference directions (``resources/reference_directions.json``):
    the embedder's fingerprint, the domains, their sources and one direction per domain."""

    fingerprint: str
    domains: list[str]
    sources: list[str]
    directions: list[list[float]]


@functools.cache
def _reference_table() -> dict[str, ReferenceDirections]:
    """The shipped reference directions, per embedder (read once per process)."""
    table: dict[str, ReferenceDirections] = json.loads(
        resources.files("samark").joinpath("resources/reference_directions.json").read_text()
    )
    return table
