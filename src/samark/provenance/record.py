"""The provenance record: what was served, written and checked sentence by sentence.

:class:`ProvenanceRecord` joins a store (:func:`~samark.provenance.store.open_store`),
the record key derived from the watermark key, and a sentence embedder. Recording a
response stores, per sentence, the keyed hash of its normal form, its unit embedding,
the request id, the key's public id and the UTC time (and the sentence itself only with
``store_text=True``). Checking a text gives each sentence a state
(:class:`~samark.provenance.report.ProvenanceState`): served verbatim, a paraphrase of a
served sentence (nearest stored cosine at or above the calibrated threshold,
:mod:`samark.provenance.threshold`), or not served.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

import numpy as np

from samark.errors import SamarkError
from samark.keys import EmbedderIdentity, WatermarkKey
from samark.provenance.entries import RecordEntry, utc_now
from samark.provenance.normalise import normalise
from samark.provenance.record_key import RecordKey
from samark.provenance.report import ProvenanceReport, ProvenanceState, SentenceProvenance
from samark.provenance.store import ProvenanceStore, StoreBinding, open_store
from samark.provenance.threshold import MIN_WORDS, default_threshold, edited_found
from samark.segment import split_sentences


class SentenceEmbedder(Protocol):
    """What the record needs of an embedder (:class:`samark.embed.Embedder` is one)."""

    @property
    def identity(self) -> EmbedderIdentity: ...

    @property
    def dim(self) -> int: ...

    def encode(self, sentences: list[str]) -> np.ndarray: ...


def new_request_id() -> str:
    """A fresh random request id (32 hex digits)."""
    return uuid.uuid4().hex


class ProvenanceRecord:
    """A store read and written under one watermark key's record key."""

    def __init__(
        self,
        store: ProvenanceStore,
        record_key: RecordKey,
        embedder: SentenceEmbedder,
        *,
        threshold: float | None = None,
    ) -> None:
        self.store = store
        self._record_key = record_key
        self.embedder = embedder
        if threshold is not None and not 0.0 < threshold <= 1.0:
            raise ValueError(f"the paraphrase threshold must be in (0, 1], got {threshold}")
        #: the cosine at or above which a sentence is a paraphrase of a stored one
        self.threshold = (
            default_threshold(embedder.identity.name) if threshold is None else threshold
        )

    @classmethod
    def open(
        cls,
        url: str,
        key: WatermarkKey,
        embedder: SentenceEmbedder,
        *,
        threshold: float | None = None,
    ) -> ProvenanceRecord:
        """The record at ``url`` under ``key``'s record key, made there if need be; a
        record of another key or embedder is refused
        (:class:`~samark.provenance.store.ProvenanceError`)."""
        record_key = RecordKey.of(key)
        binding = binding_of(record_key, embedder)
        return cls(open_store(url, binding), record_key, embedder, threshold=threshold)

    @property
    def key_id(self) -> str:
        return self._record_key.key_id

    def reachable(self) -> bool:
        """Whether the record answers now: one indexed lookup of a digest no sentence has
        (a readiness probe; no row is read, nothing is written)."""
        try:
            self.store.lookup([bytes(32)])
        except SamarkError:
            return False
        return True

    def record(
        self,
        sentences: Sequence[str],
        *,
        request_id: str | None = None,
        store_text: bool = False,
        when: datetime | None = None,
    ) -> str:
        """Store the served ``sentences`` of one request (one transaction) and return
        its id (a fresh one unless given). Sentences with an empty normal form
        (punctuation only) are left out."""
        request_id = request_id or new_request_id()
        kept = [s.strip() for s in sentences if normalise(s)]
        if not kept:
            return request_id
        when = when or utc_now()
        vectors = self.embedder.encode(kept)
        self.store.add(
            [
                RecordEntry(
                    digest=self._record_key.digest(s),
                    embedding=v,
                    request_id=request_id,
                    key_id=self.key_id,
                    created=when,
                    text=s if store_text else None,
                )
                for s, v in zip(kept, vectors, strict=True)
            ]
        )
        return request_id

    def record_text(
        self,
        text: str,
        *,
        request_id: str | None = None,
        store_text: bool = False,
        when: datetime | None = None,
    ) -> str:
        """:meth:`record` of the sentences of ``text``."""
        return self.record(
            split_sentences(text), request_id=request_id, store_text=store_text, when=when
        )

    def check(self, text: str) -> ProvenanceReport:
        """Each sentence of ``text`` checked against the record."""
        return self.check_sentences(split_sentences(text))

    def check_sentences(self, sentences: Sequence[str]) -> ProvenanceReport:
        sentences = [s.strip() for s in sentences]
        found = self.store.lookup([self._record_key.digest(s) for s in sentences])
        # only sentences long enough for the calibrated threshold are searched
        searched = [
            i
            for i, s in enumerate(sentences)
            if not found[i] and normalise(s) and len(s.split()) >= MIN_WORDS
        ]
        nearest = (
            self.store.nearest(self.embedder.encode([sentences[i] for i in searched]), k=1)
            if searched
            else []
        )
        near = dict(zip(searched, nearest, strict=True))
        out: list[SentenceProvenance] = []
        for i, sentence in enumerate(sentences):
            if found[i]:
                out.append(
                    SentenceProvenance(
                        i, sentence, ProvenanceState.SERVED, found[i][0], times_served=len(found[i])
                    )
                )
                continue
            best = near.get(i)
            if not best:
                out.append(SentenceProvenance(i, sentence, ProvenanceState.NOT_SERVED))
                continue
            top = best[0]
            if top.cosine >= self.threshold:
                out.append(
                    SentenceProvenance(
                        i, sentence, ProvenanceState.PARAPHRASE, top.sentence, top.cosine
                    )
                )
            else:
                out.append(
                    SentenceProvenance(i, sentence, ProvenanceState.NOT_SERVED, cosine=top.cosine)
                )
        band = edited_found(self.embedder.identity.name, self.threshold)
        return ProvenanceReport(tuple(out), self.threshold, self.store.count(), band)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> ProvenanceRecord:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ProvenanceRecord(store={self.store!r}, key_id={self.key_id!r})"


def binding_of(record_key: RecordKey, embedder: SentenceEmbedder) -> StoreBinding:
    """The binding a store made by this record key and embedder carries."""
    identity = embedder.identity
    return StoreBinding(
        record_key=record_key.fingerprint,
        embedder=identity.name,
        embedder_fingerprint=identity.fingerprint,
        dim=int(embedder.dim),
    )
