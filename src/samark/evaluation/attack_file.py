"""Attack every record of a JSONL file and measure each attack's fidelity
(``samark attack``): how a user audits their own watermark against the attacks we use.

Records stream through in batches (constant memory). The output is written to a temporary
file beside the destination and moved into place only when every record succeeded, so bad
input never leaves a half-written or clobbered output behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np

from samark.detection.record_files import Record, UnreadableRecord, numbered_jsonl
from samark.errors import SamarkError
from samark.evaluation import fidelity
from samark.evaluation.attacks import Attack
from samark.json_types import JSONObject

BATCH = 8


@dataclass
class AttackSummary:
    """What one ``samark attack`` run did, for its closing line."""

    records: int = 0
    aligned_similarity: list[float] = field(default_factory=list)
    sentence_ratio: list[float] = field(default_factory=list)

    @property
    def meaning_preserving(self) -> bool:
        return fidelity.is_meaning_preserving(self.aligned_similarity)

    def line(self) -> str:
        if not self.records:
            return "no records"
        return (
            f"{self.records} records; median sentence-aligned similarity "
            f"{np.median(self.aligned_similarity):.3f}, mean sentence ratio "
            f"{np.mean(self.sentence_ratio):.2f}: "
            + ("meaning-preserving" if self.meaning_preserving else "NOT meaning-preserving")
            + f" (threshold {fidelity.MEANING_PRESERVING:.2f})"
        )


def parse_params(pairs: list[str]) -> JSONObject:
    """``["ratio=0.3", "via=pt"]`` -> ``{"ratio": 0.3, "via": "pt"}`` (values as JSON when
    they parse as JSON, else as strings)."""
    params: JSONObject = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name.strip():
            raise SamarkError(f"--param takes NAME=VALUE, got {pair!r}")
        try:
            params[name.strip()] = json.loads(raw)
        except ValueError:
            params[name.strip()] = raw
    return params


def check_records(path: Path, text_field: str = "text", human_field: str | None = None) -> int:
    """The count of records of ``path``, each read and checked as the attack will read it
    (a cheap pass before any model loads); raises :class:`SamarkError` naming the first
    line that cannot be used."""
    return sum(1 for _ in _records(path, text_field, human_field))


def _records(
    path: Path, text_field: str, human_field: str | None
) -> Iterator[tuple[Record, str, str | None]]:
    """The records of ``path``, each with its text and (with ``human_field``) its human
    text; the first one that cannot be used stops the run (an attack output must hold
    every input record)."""
    for number, record in numbered_jsonl(path):
        if isinstance(record, UnreadableRecord):
            raise SamarkError(f"{path}:{number}: {record['error']}")
        text = record.get(text_field)
        if not isinstance(text, str):
            raise SamarkError(f"{path}:{number}: no string field {text_field!r}")
        human = None if human_field is None else record.get(human_field)
        if human_field is not None and not isinstance(human, str):
            raise SamarkError(f"{path}:{number}: no string field {human_field!r}")
        yield record, text, human if isinstance(human, str) else None


def record_seed(seed: int, record: int) -> int:
    """The seed the ``record``-th record (0-based) is attacked under: the run's seed and
    the record's place, so a record's rewrite is the same whatever batch it falls in."""
    blob = f"samark-attack/{seed}/{record}".encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:4], "little") & 0x7FFFFFFF


def attack_jsonl(
    attack: Attack,
    params: JSONObject,
    source: Path,
    destination: Path,
    encoder: fidelity.SentenceEncoder,
    *,
    seed: int = 0,
    text_field: str = "text",
    human_field: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> AttackSummary:
    """Attack the ``text_field`` of every record of ``source`` into ``destination``.

    Each output record keeps the input's fields, with ``text_field`` replaced by the attacked
    text, ``original_<text_field>`` holding the original, ``attack`` (name, parameters,
    seed) and ``fidelity`` (:class:`samark.evaluation.fidelity.Fidelity`'s fields).
    """
    if source.resolve() == destination.resolve():
        raise SamarkError("the output must be another file than the input")
    destination.parent.mkdir(parents=True, exist_ok=True)
    summary = AttackSummary()

    def flush(batch: list[tuple[Record, str, str | None]], out: TextIO) -> None:
        texts = [text for _, text, _ in batch]
        humans = [human or "" for *_, human in batch] if human_field else None
        seeds = [record_seed(seed, summary.records + i) for i in range(len(batch))]
        attacked = attack.apply_batch(texts, seeds=seeds, human=humans)
        for (record, text, _), s, new, fid in zip(
            batch, seeds, attacked, fidelity.measure(encoder, texts, attacked), strict=True
        ):
            result: dict[str, object] = {
                **record,
                text_field: new,
                f"original_{text_field}": text,
                "attack": {"name": attack.name, "params": params, "seed": s},
                "fidelity": fid.to_dict(),
            }
            out.write(json.dumps(result, ensure_ascii=False) + "\n")
            summary.records += 1
            summary.aligned_similarity.append(fid.aligned_similarity)
            summary.sentence_ratio.append(fid.sentence_ratio)
        if progress:
            progress(summary.records)

    fd, tmp = tempfile.mkstemp(prefix=f".{destination.name}.", dir=destination.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            batch: list[tuple[Record, str, str | None]] = []
            for record in _records(source, text_field, human_field):
                batch.append(record)
                if len(batch) == BATCH:
                    flush(batch, out)
                    batch = []
            if batch:
                flush(batch, out)
        os.replace(tmp, destination)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return summary
