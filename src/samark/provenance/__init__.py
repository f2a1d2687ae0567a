"""The provenance record: what was served, and which sentences of a text it vouches for.

A watermark vouches for a text's origin, not its content: an edited marked text keeps
its mark. The record keeps, per served sentence, a keyed hash of its normal form and its
embedding, so that a checked text's sentences can be called served verbatim, a
paraphrase of a served sentence (which one, when, which request), or not served. See
docs/provenance.md.

- :mod:`~samark.provenance.normalise`: the normal form hashed;
- :mod:`~samark.provenance.record_key`: the record key, derived one-way from the key;
- :mod:`~samark.provenance.store`: the store protocol and the URL that picks a backend
  from :data:`~samark.provenance.store.BACKENDS`, a :class:`~samark.registry.Registry`
  (:mod:`~samark.provenance.sqlite_store`, the embedded default;
  :mod:`~samark.provenance.postgres_store`);
- :mod:`~samark.provenance.record`: recording and checking;
- :mod:`~samark.provenance.migrate`: copying a record into another store;
- :mod:`~samark.provenance.report`: what a check returns;
- :mod:`~samark.provenance.threshold`: the calibrated paraphrase thresholds;
- :mod:`~samark.provenance.c2pa_manifest`: a signed C2PA manifest on served text, and its
  check (``intact``, ``altered``, ``unverifiable``, ``none``), with the ``c2pa`` extra
  (:mod:`~samark.provenance.c2pa_native`: the two native calls it makes).
"""

from samark.provenance.entries import Neighbour, RecordEntry, StoredSentence
from samark.provenance.normalise import normalise
from samark.provenance.record import ProvenanceRecord, new_request_id
from samark.provenance.record_key import RecordKey
from samark.provenance.report import ProvenanceReport, ProvenanceState, SentenceProvenance
from samark.provenance.store import (
    BACKENDS,
    ProvenanceError,
    ProvenanceStore,
    StoreBinding,
    check_url,
    open_store,
)
from samark.provenance.threshold import default_threshold

__all__ = [
    "BACKENDS",
    "Neighbour",
    "ProvenanceError",
    "ProvenanceRecord",
    "ProvenanceReport",
    "ProvenanceState",
    "ProvenanceStore",
    "RecordEntry",
    "RecordKey",
    "SentenceProvenance",
    "StoreBinding",
    "StoredSentence",
    "check_url",
    "default_threshold",
    "new_request_id",
    "normalise",
    "open_store",
]
