"""Detection over record files of any size: JSONL or Parquet read a chunk at a time, the
sentences of a chunk embedded in one batched call, one result per record, in order.

Memory stays bounded by the chunk, never the file. A record that cannot be read (invalid
UTF-8 or JSON, not an object, no string text field, no sentence) keeps its place with an
``error`` field instead of stopping the run.

A C2PA manifest carried in a text (an invisible wrapper, see
:mod:`samark.provenance.c2pa_manifest`) is stripped before scoring, as for one text: the
mark and the record see the same words with or without it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from samark.embed import Embedder
from samark.errors import EmptyTextError, SamarkError
from samark.intake import TextRefused, admit
from samark.provenance.c2pa_manifest import strip_manifest
from samark.schemes.features import TextFeatures, text_features

if TYPE_CHECKING:
    from samark.detection.ring_detector import RingDetection
    from samark.detection_result import Detection

Record = dict[str, object]
Advance = Callable[[int], None]

#: records whose sentences are embedded together (the embedder batches across texts)
DEFAULT_CHUNK = 32
NO_SENTENCE = "the text has no sentence to score"


class UnreadableRecord(dict[str, object]):
    """The place of a line that could not be read: ``{"line", "error"}`` (a class of its
    own, so that a record's own ``error`` field is never taken for one)."""


class Result(Protocol):
    """What a record takes from a detection: a :class:`Detection` or a keyring's
    ``RingDetection``."""

    @property
    def p_value(self) -> float: ...

    @property
    def is_watermarked(self) -> bool: ...

    def to_dict(self, *, details: bool = False) -> Mapping[str, object]: ...


class BatchDetector(Protocol):
    """A key or keyring that scores texts together: a scheme or a ``RingDetector``."""

    @property
    def embedder(self) -> Embedder | None: ...

    def detect_many(self, texts: list[str]) -> Sequence[Result | None]: ...

    def detect_prepared(
        self, features: Sequence[TextFeatures]
    ) -> Sequence[Result | EmptyTextError]: ...


def read_jsonl(path: Path, advance: Advance | None = None) -> Iterator[Record]:
    """Records of a JSONL file, streamed; a bad line becomes ``{"line", "error"}``.
    ``advance`` receives the records read (1 for each; for progress)."""
    for _, record in numbered_jsonl(path, advance):
        yield record


def numbered_jsonl(path: Path, advance: Advance | None = None) -> Iterator[tuple[int, Record]]:
    """``read_jsonl`` with each record's line number (blank lines are skipped)."""
    try:
        f = path.open("rb")
    except OSError as exc:
        raise SamarkError(f"cannot read {path}: {exc.strerror}") from None
    with f:
        for number, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            if advance:
                advance(1)
            try:
                record = json.loads(raw.decode("utf-8"))
                if not isinstance(record, dict):
                    raise ValueError("not a JSON object")
            except UnicodeDecodeError:
                yield number, UnreadableRecord(line=number, error="record is not UTF-8 text")
                continue
            except ValueError as exc:
                yield number, UnreadableRecord(line=number, error=f"invalid JSON record: {exc}")
                continue
            yield number, record


def read_parquet(path: Path, advance: Advance | None = None, rows: int = 1024) -> Iterator[Record]:
    """Rows of a Parquet file, ``rows`` at a time (needs pyarrow: ``samark[scale]``).
    ``advance`` receives the rows read."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise SamarkError("Parquet files need pyarrow: pip install 'samark[scale]'") from None
    try:
        table = pq.ParquetFile(path)
    except (OSError, ValueError) as exc:
        raise SamarkError(f"cannot read {path} as Parquet: {exc}") from None
    for batch in table.iter_batches(batch_size=rows):
        records = batch.to_pylist()
        if advance:
            advance(len(records))
        yield from records


def count_records(path: Path) -> int:
    """The records of a JSONL file (its lines that are not blank, unreadable ones
    included: each gets a result line) or the rows of a Parquet file, counted without
    parsing them; raises :class:`SamarkError` where the file cannot be read."""
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise SamarkError("Parquet files need pyarrow: pip install 'samark[scale]'") from None
        try:
            return int(pq.ParquetFile(path).metadata.num_rows)
        except (OSError, ValueError) as exc:
            raise SamarkError(f"cannot read {path} as Parquet: {exc}") from None
    try:
        with path.open("rb") as f:
            return sum(1 for raw in f if raw.strip())
    except OSError as exc:
        raise SamarkError(f"cannot read {path}: {exc.strerror}") from None


def detect_records(
    scheme: BatchDetector,
    records: Iterable[Record],
    field: str = "text",
    *,
    details: bool = False,
    chunk: int = DEFAULT_CHUNK,
) -> Iterator[Record]:
    """Each record with its detection fields added (``p_value``, ``is_watermarked``, ...),
    or an ``error`` field; in input order, ``chunk`` records embedded at a time. A text's
    C2PA manifest is not scored (the record's field is left as it was)."""
    if chunk < 1:
        raise ValueError("chunk must be >= 1")
    it = iter(records)
    while batch := list(islice(it, chunk)):
        todo: list[tuple[Record, str]] = []
        for record in batch:
            if isinstance(record, UnreadableRecord):
                continue
            text = record.get(field)
            if isinstance(text, str):
                todo.append((record, strip_manifest(text)))
            else:
                record["error"] = no_text_field(field)
        for (record, _), result in zip(todo, _scored(scheme, [t for _, t in todo]), strict=True):
            if isinstance(result, SamarkError):  # binary, or nothing to score: its words
                record.update(p_value=None, is_watermarked=None, error=str(result))
            else:
                record.update(result.to_dict(details=details))
        yield from batch


def _scored(scheme: BatchDetector, texts: list[str]) -> list[Result | SamarkError]:
    """Each text's detection, or its own error: refused at intake (binary; any size is
    taken: a file is checked as ``--long``), or nothing to score. Each text is split and
    embedded once (:mod:`samark.detection.pipeline`)."""
    out: dict[int, Result | SamarkError] = {}
    split: dict[int, list[str]] = {}
    for i, text in enumerate(texts):
        try:
            split[i] = admit(text, limits=None)
        except TextRefused as exc:
            out[i] = exc
    features = text_features(
        [texts[i] for i in split], scheme.embedder, sentences=[*split.values()]
    )
    out.update(zip(split, scheme.detect_prepared(features), strict=True))
    return [out[i] for i in range(len(texts))]


def failed_record(record: Record) -> bool:
    """Whether ``record`` was not scored: unreadable, or an ``error`` of this detection
    (a record's own ``error`` field beside a p-value is its own)."""
    return isinstance(record, UnreadableRecord) or (
        "error" in record and record.get("p_value") is None
    )


def no_text_field(field: str) -> str:
    return f"record has no string field {field!r}"


def result_columns(
    results: Sequence[Detection | RingDetection | None], *, ring: bool = False
) -> dict[str, list[object]]:
    """The summary fields of many detections (``Detection`` or, with ``ring``,
    ``RingDetection``; None for a text without a sentence) as columns (a table's new
    columns)."""
    columns: dict[str, list[object]] = {
        "p_value": [r.p_value if r else None for r in results],
        "is_watermarked": [r.is_watermarked if r else None for r in results],
        "n_units": [r.n_units if r else 0 for r in results],
        "statistic": [r.statistic if r else None for r in results],
        "error": [None if r else NO_SENTENCE for r in results],
    }
    if ring:
        from samark.detection.ring_detector import RingDetection

        found = [r if isinstance(r, RingDetection) else None for r in results]
        columns["key_label"] = [r.label if r else None for r in found]
        columns["key_id"] = [r.key_id if r else None for r in found]
        columns["payload"] = [r.payload if r else None for r in found]
    return columns
