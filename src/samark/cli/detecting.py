"""``samark detect`` and ``samark check-key``: a text, a record file or a Ray dataset
tested for a key's (or a keyring's) mark, and a key's false-positive rate on human text.

Exit codes of ``samark detect``, as with grep: 0 a watermark was found (in at least one
record), 1 none was found, 2 an error."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from samark.cli.app import app
from samark.cli.common import (
    CellsOption,
    KeyOption,
    TextFlag,
    TextInput,
    cells_field,
    check_cells,
    counted,
    err,
    fail,
    is_file,
    looks_like_path,
    progress,
    read_text,
    require_sentences,
)
from samark.cli.loading import (
    COMMAND_STATISTIC,
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
from samark.cli.record import RecordOption, check_record_url, open_record
from samark.detection.record_files import DEFAULT_CHUNK
from samark.detection.ring_detector import RingDetector
from samark.errors import SamarkError

#: a Ray batch's records (``--ray``); a file's records are detected ``DEFAULT_CHUNK`` at a
#: time (``--chunk``)
RAY_BATCH = 64


@app.command()
def detect(
    source: Annotated[
        str | None,
        typer.Argument(help="Text, a file, '@file', '-' for stdin, or a .jsonl / .parquet file."),
    ] = None,
    key: KeyOption = Path("samark.key"),
    alpha: Annotated[float, typer.Option(help="Significance level of the decision.")] = 0.01,
    field: Annotated[str, typer.Option(help="Text field of JSONL records.")] = "text",
    details: Annotated[
        bool,
        typer.Option(
            help="Per-sentence and per-channel evidence, and per-sentence p-values "
            "(which sentences carry the mark)."
        ),
    ] = False,
    statistic: Annotated[
        str | None,
        typer.Option(
            help="SAMark's test statistic: scan (default: keeps its power on text mixed with "
            "human writing), z (the paper's) or alignment (docs/statistics.md). Every one "
            "has an exact p-value."
        ),
    ] = None,
    chunk: Annotated[
        int | None,
        typer.Option(
            help="Records of a file detected together: one embedding call, one pass over "
            "keyed cells' null draws (memory vs speed; default 32, with --ray 64 a batch)."
        ),
    ] = None,
    ray: Annotated[
        int | None,
        typer.Option(
            help="Run on a local Ray instance with this many workers (samark[scale]); "
            "writes Parquet to --out."
        ),
    ] = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out", "-o", help="Output folder of --ray (Parquet).")
    ] = None,
    scheme_name: SchemeOption = None,
    any_scheme: AnySchemeOption = False,
    keyring: KeyringOption = None,
    at: Annotated[
        str | None,
        typer.Option(
            help="With --keyring: only the keys in use at this date (ISO 8601), when the "
            "text's date is known: fewer keys, more power."
        ),
    ] = None,
    literal: TextFlag = False,
    centring: CentringOption = None,
    record_url: RecordOption = None,
    paraphrase_threshold: Annotated[
        float | None,
        typer.Option(
            help="With --record: the cosine at or above which a sentence is a paraphrase "
            "of a served one (default: the embedder's calibrated threshold).",
            min=0.0,
            max=1.0,
        ),
    ] = None,
    cells: CellsOption = None,
) -> None:
    """Test a text, or each record of a JSONL or Parquet file, for the watermark of a key.

    With a KEYRING, for the watermark of any of its keys: one p-value with family-wise error
    control, and the key that marked it. SOURCE is a file where one exists; a one-word
    SOURCE that looks like a file name (a '/', or an extension such as .txt) but names none
    is an error, unless --text says it is the text. With --record, each sentence's
    provenance too: served, a paraphrase of a served sentence, or not served
    (docs/provenance.md)."""
    scheme_name = resolve_scheme(scheme_name, key, keyring, any_scheme=any_scheme)
    if (chunk is not None and chunk < 1) or (ray is not None and ray < 1):
        raise fail("--chunk and --ray must be >= 1")
    if not 0 < alpha < 1:
        raise fail(f"--alpha must be between 0 and 1, got {alpha}")
    if at is not None and keyring is None:
        raise fail("--at chooses the keys of a --keyring in use at a date")
    samark_family = can(scheme_name, "statistics")
    if not samark_family and (ray is not None or statistic is not None or centring):
        raise fail(
            "--ray, --statistic and --centring are SAMark's; leave them out for " + scheme_name
        )
    if centring is not None and ray is not None:
        raise fail("--centring is not available with --ray")
    check_cells(cells, scheme_name, samark_family)
    fields = {**centring_fields(centring), **cells_field(cells)}
    if record_url is not None and (keyring is not None or ray is not None):
        raise fail("--record reads a record made with one --key (not with --keyring or --ray)")
    if paraphrase_threshold is not None and record_url is None:
        raise fail("--paraphrase-threshold applies to a --record")
    check_record_url(record_url)
    # what to read is checked before any model loads: a missing file, an empty text or
    # a file without records fails at once
    records: tuple[Path, int] | None = None
    given: TextInput | None = None
    if ray is not None:
        if source is None or out_dir is None or literal:
            raise fail("--ray needs a .jsonl or .parquet SOURCE and --out FOLDER")
        if at is not None:
            raise fail("--at is not available with --ray")
        _check_ray_source(Path(source))
    else:
        records = None if literal else _records_file(source)
        if records is None:
            given = read_text(source, literal=literal)
            require_sentences(given, "score")
    # a bad key or ring fails here, before Ray starts
    # one key is a ring of one: every path below detects through a RingDetector
    detector: RingDetector
    if keyring is not None:
        detector = load_ring_detector(
            keyring, scheme_name, statistic=statistic, alpha=alpha, at=at, **fields
        )
    elif samark_family:
        detector = RingDetector.of_scheme(
            load_scheme(key, scheme_name, statistic=statistic, alpha=alpha, **fields)
        )
    else:
        detector = RingDetector.of_scheme(load_other_scheme(scheme_name, key, alpha=alpha))
    if ray is not None:
        assert source is not None and out_dir is not None
        raise typer.Exit(
            _detect_on_ray(
                Path(source),
                out_dir,
                field,
                ray,
                scheme_name,
                statistic or COMMAND_STATISTIC,
                alpha,
                key=None if keyring is not None else key,
                keyring=keyring,
                cells=cells,
                batch=chunk or RAY_BATCH,
            )
        )
    embedder = detector.schemes[0].embedder
    if embedder is not None:
        embedder.progress_over = 2000  # a book-length text takes minutes: show it
    provenance = (
        open_record(record_url, key, embedder, threshold=paraphrase_threshold)
        if record_url is not None
        else None
    )
    if records is not None:
        raise typer.Exit(
            _detect_file(detector, *records, field, details, chunk or DEFAULT_CHUNK, provenance)
        )
    assert given is not None
    _detect_text(detector, given.text, details, provenance)


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


def _detect_text(
    scheme: RingDetector, text: str, details: bool, provenance: Any = None
) -> NoReturn:
    """Detect with ``scheme`` (a key or keyring) in one text; exits 0 if watermarked, 1 if
    not. With a ``provenance`` record, each sentence's provenance too (a ``provenance`` field)."""
    try:
        result = scheme.detect(text)
        report = None if provenance is None else provenance.check(text)
    except SamarkError as exc:
        raise fail(str(exc)) from None
    out = result.to_dict(details=details)
    if report is not None:
        out["provenance"] = report.to_dict()
    typer.echo(json.dumps(out, ensure_ascii=False))
    words = result.describe()
    if result.is_watermarked:  # the verdict in bold green
        words = "[bold green]watermarked[/]" + words.removeprefix("watermarked")
    err.print(words, soft_wrap=True)
    if report is not None:
        err.print(f"record: {report.summary()}", highlight=False, soft_wrap=True)
    raise typer.Exit(0 if result.is_watermarked else 1)


def _detect_file(
    scheme: RingDetector,
    path: Path,
    total: int,
    field: str,
    details: bool,
    chunk: int,
    provenance: Any = None,
) -> int:
    """One result line per record of a JSONL or Parquet file (``total`` records),
    streamed in chunks whose sentences are embedded together (constant memory); a record
    that cannot be read or scored gets an ``error`` line, never a crash, and makes the
    exit code 2 (as grep's for a file it could not read). Progress counts the records
    whose results are written."""
    from samark.detection.record_files import (
        NO_SENTENCE,
        UnreadableRecord,
        detect_records,
        no_text_field,
        read_jsonl,
        read_parquet,
    )

    found = False
    failed: list[int] = []
    errors = (no_text_field(field), NO_SENTENCE)
    with progress() as bar:
        task = bar.add_task(f"detecting {path.name}", total=total, unit="records")
        records = read_parquet(path) if path.suffix == ".parquet" else read_jsonl(path)
        try:
            for number, record in enumerate(
                detect_records(scheme, records, field, details=details, chunk=chunk), 1
            ):
                found |= bool(record.get("is_watermarked"))
                if isinstance(record, UnreadableRecord) or record.get("error") in errors:
                    failed.append(number)
                elif provenance is not None:
                    record["provenance"] = provenance.check(record[field]).to_dict()
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
    file ``key`` or every key of ``keyring`` (``cells``: SAMark's keyed cells; ``batch``:
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
