"""``samark detect`` and ``samark check-key``: a text, a record file or a Ray dataset
tested for a key's (or a keyring's) mark, and a key's false-positive rate on human text.

Exit codes of ``samark detect``, as with grep: 0 a watermark was found (in at least one
record), 1 none was found, 2 an error."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from samark.cli.app import app
from samark.cli.common import (
    CellsOption,
    KeyOption,
    NullStopOption,
    StatisticOption,
    TextFlag,
    cells_field,
    check_cells,
    err,
    fail,
    is_file,
    looks_like_path,
    progress,
    read_text,
    refuse_scheme_options,
)
from samark.cli.loading import (
    AnySchemeOption,
    CentringOption,
    KeyringOption,
    SchemeOption,
    can,
    centring_fields,
    load_other_scheme,
    load_ring_detector,
    load_scheme,
    resolve_scheme,
)
from samark.cli.long_text import AdmittedText, check_intake
from samark.cli.manifest_options import C2paTrustOption, manifest_verifier
from samark.cli.one_text import detect_one_text
from samark.cli.record import RecordOption, check_record_url, open_record
from samark.detection.record_files import DEFAULT_CHUNK
from samark.detection.ring_detector import RingDetector
from samark.errors import SamarkError
from samark.provenance.c2pa_manifest import strip_manifest
from samark.text import counted
from samark.verdict import MarkEvidence, RecordEvidence, verdict

if TYPE_CHECKING:
    from samark.provenance import ProvenanceRecord

#: a Ray batch's records (``--ray``); a file's records are detected ``DEFAULT_CHUNK`` at a
#: time (``--chunk``)
RAY_BATCH = 64


SourceArgument = Annotated[
    str | None,
    typer.Argument(help="Text, a file, '@file', '-' for stdin, or a .jsonl / .parquet file."),
]
AlphaOption = Annotated[float, typer.Option(help="Significance level of the decision.")]
FieldOption = Annotated[str, typer.Option(help="Text field of JSONL records.")]
LongOption = Annotated[
    bool,
    typer.Option(
        "--long",
        help="Check one text over the server's limits (100,000 characters or 200 "
        "sentences), with a progress bar that counts its sentences.",
    ),
]
DetailsOption = Annotated[
    bool,
    typer.Option(
        help="Per-sentence and per-channel evidence, and per-sentence p-values "
        "(which sentences carry the mark)."
    ),
]
ChunkOption = Annotated[
    int | None,
    typer.Option(
        help="Records of a file detected together: one embedding call, one pass over "
        "keyed cells' null draws (memory vs speed; default 32, with --ray 64 a batch)."
    ),
]
RayOption = Annotated[
    int | None,
    typer.Option(
        help="Run on a local Ray instance with this many workers (samark[scale]); "
        "writes Parquet to --out."
    ),
]
OutOption = Annotated[
    Path | None, typer.Option("--out", "-o", help="Output folder of --ray (Parquet).")
]
AtOption = Annotated[
    str | None,
    typer.Option(
        help="With --keyring: only the keys in use at this date (ISO 8601), when the "
        "text's date is known: fewer keys, more power."
    ),
]
ParaphraseThresholdOption = Annotated[
    float | None,
    typer.Option(
        help="With --record: the cosine at or above which a sentence is a paraphrase "
        "of a served one (default: the embedder's calibrated threshold).",
        min=0.0,
        max=1.0,
    ),
]


@dataclass(frozen=True)
class DetectRequest:
    """What ``samark detect`` was asked: its options, checked before any model loads
    (:meth:`check`), then run (:meth:`run`)."""

    source: str | None
    key: Path
    alpha: float
    field: str
    details: bool
    statistic: str | None
    chunk: int | None
    ray: int | None
    out_dir: Path | None
    scheme: str
    keyring: Path | None
    at: str | None
    literal: bool
    centring: Path | None
    record_url: str | None
    paraphrase_threshold: float | None
    cells: int | None
    null_stop: int | None = None
    c2pa_trust: tuple[Path, ...] = ()
    long: bool = False

    @property
    def samark_family(self) -> bool:
        return can(self.scheme, "pivot_detector")

    def check(self) -> None:
        """Refuse options that do not go together (exit 2), naming them."""
        if (self.chunk is not None and self.chunk < 1) or (self.ray is not None and self.ray < 1):
            raise fail("--chunk and --ray must be >= 1")
        if not 0 < self.alpha < 1:
            raise fail(f"--alpha must be between 0 and 1, got {self.alpha}")
        if self.at is not None and self.keyring is None:
            raise fail("--at chooses the keys of a --keyring in use at a date")
        refuse_scheme_options(
            self.scheme,
            statistic=self.statistic,
            centring=self.centring,
            null_stop=self.null_stop,
            cells=self.cells,
        )
        if self.ray is not None and not self.samark_family:
            raise fail(f"--ray scores records with a pivot detector, which {self.scheme} has not")
        if self.null_stop is not None and self.ray is not None:
            raise fail("--null-stop is not available with --ray")
        if self.centring is not None and self.ray is not None:
            raise fail("--centring is not available with --ray")
        check_cells(self.cells, self.scheme)
        if self.record_url is not None and (self.keyring is not None or self.ray is not None):
            raise fail("--record reads a record made with one --key (not with --keyring or --ray)")
        if self.paraphrase_threshold is not None and self.record_url is None:
            raise fail("--paraphrase-threshold applies to a --record")
        check_record_url(self.record_url)
        if self.ray is not None:
            if self.source is None or self.out_dir is None or self.literal:
                raise fail("--ray needs a .jsonl or .parquet SOURCE and --out FOLDER")
            if self.at is not None:
                raise fail("--at is not available with --ray")
            _check_ray_source(Path(self.source))

    def detector(self) -> RingDetector:
        """The key (a ring of one) or keyring to detect with; a bad key or ring fails here,
        before Ray starts."""
        fields = {**centring_fields(self.centring), **cells_field(self.cells)}
        if self.null_stop is not None:
            fields["null_stop"] = self.null_stop
        stat, alpha = self.statistic, self.alpha
        if self.keyring is not None:
            return load_ring_detector(
                self.keyring, self.scheme, statistic=stat, alpha=alpha, at=self.at, **fields
            )
        if self.samark_family:
            one = load_scheme(self.key, self.scheme, statistic=stat, alpha=alpha, **fields)
            return RingDetector.of_scheme(one)
        return RingDetector.of_scheme(load_other_scheme(self.scheme, self.key, alpha=alpha))

    def run(self) -> NoReturn:
        """Detect in the text, the record file or (with --ray) the dataset; exits with
        grep's codes."""
        self.check()
        # what to read is checked before any model loads: a missing file, an empty text
        # or a file without records fails at once
        records = None if self.literal or self.ray is not None else _records_file(self.source)
        admitted: AdmittedText | None = None
        if self.ray is None and records is None:
            given = read_text(self.source, literal=self.literal)
            admitted = check_intake(given, self.long)  # the server's limits and words
            if not admitted.sentences:  # split once, before any model loads
                raise fail(f"{given.origin} is empty: no sentence to score")
        elif self.long:
            raise fail("--long checks one text over the server's limits, not a file of records")
        detector = self.detector()
        if self.ray is not None:
            raise typer.Exit(self._on_ray())
        embedder = detector.schemes[0].embedder
        if embedder is not None and records is not None:
            embedder.progress_over = 2000  # a book-length record takes minutes: show it
        provenance = (
            open_record(self.record_url, self.key, embedder, threshold=self.paraphrase_threshold)
            if self.record_url is not None
            else None
        )
        if records is not None:
            chunk = self.chunk or DEFAULT_CHUNK
            raise typer.Exit(
                _detect_file(detector, *records, self.field, self.details, chunk, provenance)
            )
        assert admitted is not None
        verifier = manifest_verifier(list(self.c2pa_trust))
        detect_one_text(detector, admitted, self.details, provenance, verifier, self.long)

    def _on_ray(self) -> int:
        assert self.source is not None and self.out_dir is not None and self.ray is not None
        return _detect_on_ray(
            Path(self.source),
            self.out_dir,
            self.field,
            self.ray,
            self.scheme,
            self.statistic,
            self.alpha,
            key=None if self.keyring is not None else self.key,
            keyring=self.keyring,
            cells=self.cells,
            batch=self.chunk or RAY_BATCH,
        )


@app.command()
def detect(
    source: SourceArgument = None,
    key: KeyOption = Path("samark.key"),
    alpha: AlphaOption = 0.01,
    field: FieldOption = "text",
    details: DetailsOption = False,
    statistic: StatisticOption = None,
    chunk: ChunkOption = None,
    ray: RayOption = None,
    out_dir: OutOption = None,
    scheme_name: SchemeOption = None,
    any_scheme: AnySchemeOption = False,
    keyring: KeyringOption = None,
    at: AtOption = None,
    literal: TextFlag = False,
    centring: CentringOption = None,
    record_url: RecordOption = None,
    paraphrase_threshold: ParaphraseThresholdOption = None,
    cells: CellsOption = None,
    null_stop: NullStopOption = None,
    c2pa_trust: C2paTrustOption = None,
    long: LongOption = False,
) -> None:
    """Test a text, or each record of a JSONL or Parquet file, for the watermark of a key.

    With a KEYRING, for the watermark of any of its keys: one p-value with family-wise error
    control, and the key that marked it. SOURCE is a file where one exists; a one-word
    SOURCE that looks like a file name (a '/', or an extension such as .txt) but names none
    is an error, unless --text says it is the text. With --record, each sentence's
    provenance too: served, a paraphrase of a served sentence, or not served
    (docs/provenance.md)."""
    DetectRequest(
        source=source,
        key=key,
        alpha=alpha,
        field=field,
        details=details,
        statistic=statistic,
        chunk=chunk,
        ray=ray,
        out_dir=out_dir,
        scheme=resolve_scheme(scheme_name, key, keyring, any_scheme=any_scheme),
        keyring=keyring,
        at=at,
        literal=literal,
        centring=centring,
        record_url=record_url,
        paraphrase_threshold=paraphrase_threshold,
        cells=cells,
        null_stop=null_stop,
        c2pa_trust=tuple(c2pa_trust or ()),
        long=long,
    ).run()


def _records_file(source: str | None) -> tuple[Path, int] | None:
    """A .jsonl / .parquet SOURCE and its count of records; None for any other SOURCE.
    Fails (exit 2) where such a file is missing, unreadable or holds no record."""
    from samark.detection.record_files import count_records

    if source is None or source.startswith("@") or not source.endswith((".jsonl", ".parquet")):
        return None  # '@file': a file read whole, as one text
    path = Path(source).expanduser()
    if not is_file(path):
        if not looks_like_path(source):
            return None  # words that end in ".jsonl": a text
        what = "is a folder, not a file" if path.is_dir() else "no such file"
        raise fail(f"{source}: {what} (to score these words as the text, add --text)")
    try:
        total = count_records(path)
    except SamarkError as exc:
        raise fail(str(exc)) from None
    if total == 0:
        raise fail(f"{source} holds no records: nothing to detect")
    return path, total


def _check_ray_source(source: Path) -> None:
    if source.suffix not in (".jsonl", ".parquet") and not source.is_dir():
        raise fail("--ray reads a .jsonl or .parquet file, or a folder of Parquet files")
    if not source.exists():
        raise fail(f"{source}: no such file or folder")


def _detect_file(
    scheme: RingDetector,
    path: Path,
    total: int,
    field: str,
    details: bool,
    chunk: int,
    provenance: ProvenanceRecord | None = None,
) -> int:
    """One result line per record of a JSONL or Parquet file (``total`` records),
    streamed in chunks whose sentences are embedded together (constant memory); a record
    that cannot be read or scored gets an ``error`` line, never a crash, and makes the
    exit code 2 (as grep's for a file it could not read). Progress counts the records
    whose results are written."""
    from samark.detection.record_files import (
        detect_records,
        failed_record,
        read_jsonl,
        read_parquet,
    )

    found = False
    failed: list[int] = []
    with progress() as bar:
        task = bar.add_task(f"detecting {path.name}", total=total, unit="records")
        records = read_parquet(path) if path.suffix == ".parquet" else read_jsonl(path)
        try:
            for number, record in enumerate(
                detect_records(scheme, records, field, details=details, chunk=chunk), 1
            ):
                found |= bool(record.get("is_watermarked"))
                if failed_record(record):
                    failed.append(number)
                elif provenance is not None:
                    body = strip_manifest(str(record[field]))  # the record never sees a manifest
                    report = record["provenance"] = provenance.check(body).to_dict()
                    said = verdict(MarkEvidence.of_answer(record), RecordEvidence.of_report(report))
                    record["verdict"] = said.to_dict()
                typer.echo(json.dumps(record, ensure_ascii=False, default=str))
                bar.advance(task, 1)
        except SamarkError as exc:
            raise fail(str(exc)) from None
    if failed:
        shown = ", ".join(map(str, failed[:10])) + (", ..." if len(failed) > 10 else "")
        lines = (
            f"output line {shown} carries" if len(failed) == 1 else f"output lines {shown} carry"
        )
        raise fail(
            f"{len(failed)} of {counted(total, 'record')} of {path} not scored: {lines} "
            "the error; the others are scored"
        )
    return 0 if found else 1


def _detect_on_ray(
    source: Path,
    out_dir: Path,
    field: str,
    workers: int,
    scheme: str,
    statistic: str | None,
    alpha: float,
    *,
    key: Path | None = None,
    keyring: Path | None = None,
    cells: int | None = None,
    batch: int = RAY_BATCH,
) -> int:
    """The same detection on a local Ray instance with ``workers`` actors, with the key
    file ``key`` or every key of ``keyring`` (``cells``: keyed semantic cells; ``batch``:
    the records each actor detects together); writes Parquet."""
    try:
        import ray
        import ray.data

        from samark.detection.ray import detect_dataset
    except ImportError as exc:
        raise fail(f"--ray needs ray[data] ({exc}): pip install 'samark[scale]'") from None
    start = time.monotonic()
    # one CPU per detecting actor, and one for the tasks that read and write files
    ray.init(
        num_cpus=workers + 1,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.WARNING,
    )
    ray.data.DataContext.get_current().enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)  # its own progress, per second
    try:
        # one file is one block by default: split it so that every worker gets some
        blocks = None if source.is_dir() else 4 * workers
        ds = (
            ray.data.read_json(str(source), lines=True, override_num_blocks=blocks)
            if source.suffix == ".jsonl"
            else ray.data.read_parquet(str(source), override_num_blocks=blocks)
        )
        detected = detect_dataset(
            ds,
            None if key is None else str(key),
            keyring=None if keyring is None else str(keyring),
            scheme=scheme,
            field=field,
            statistic=statistic,
            alpha=alpha,
            workers=workers,
            batch_size=batch,
            cells=cells,
        ).materialize()
        detected.write_parquet(str(out_dir))
        flags: list[bool] = []
        failed = 0
        for rows in detected.select_columns(["is_watermarked", "error"]).iter_batches():
            flags += [bool(x) for x in rows["is_watermarked"] if x is not None]
            failed += sum(1 for e in rows["error"] if isinstance(e, str))
        count = detected.count()
    finally:
        ray.shutdown()
    seconds = time.monotonic() - start
    err.print(
        f"{counted(count, 'record')}, {sum(flags)} watermarked, {seconds:.0f} s, "
        f"{workers} Ray workers: {out_dir}",
        highlight=False,
    )
    if failed:  # as for a file read in-process: every row written, exit 2
        raise fail(f"{failed} of {counted(count, 'record')} not scored: see their error column")
    return 0 if any(flags) else 1
