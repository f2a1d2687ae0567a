"""``samark keygen`` and ``samark generate``: keys, and watermarked text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from samark.cli.app import app
from samark.cli.common import (
    CellsOption,
    KeyOption,
    TextFlag,
    cells_field,
    check_cells,
    check_embedder_name,
    check_new_file,
    err,
    fail,
    progress,
    read_text,
    require_positive,
    sentence_progress,
)
from samark.cli.loading import (
    AnySchemeOption,
    DeprecatedEngineOption,
    EngineOption,
    KeyringOption,
    SchemeOption,
    can,
    chosen_engine,
    load_other_scheme,
    load_scheme,
    resolve_scheme,
    ring_key_file,
    scheme_engine,
    schemes_that,
)
from samark.cli.record import RecordOption, check_record_options, open_record, record_served
from samark.errors import SamarkError
from samark.keys.samark_material import DEFAULT_CELLS
from samark.models import DEFAULT_EMBEDDER, DEFAULT_GENERATOR


@app.command()
def keygen(
    output: Annotated[Path, typer.Argument(help="Where to write the key file.")] = Path(
        "samark.key"
    ),
    embedder: Annotated[
        str, typer.Option(help="Embedder preset or local sentence-transformers folder.")
    ] = DEFAULT_EMBEDDER,
    force: Annotated[bool, typer.Option(help="Overwrite an existing key file.")] = False,
    cells: Annotated[
        int,
        typer.Option(
            help="Keyed semantic cells of the key's layered mark (samark-layered; 0: the "
            "paper's static pivots). The paper's samark scheme ignores them."
        ),
    ] = DEFAULT_CELLS,
    scheme_name: Annotated[
        str,
        typer.Option(
            "--scheme",
            help="The scheme the key is made for (written in the key file): generate, detect, "
            "serve and page use it unless told otherwise.",
        ),
    ] = "samark-layered",
) -> None:
    """Write a new secret key (owner-only permissions) bound to an embedder."""
    check_new_file(output, "key file", force=force)
    from samark.schemes import scheme_names

    if scheme_name not in scheme_names():
        raise fail(f"unknown scheme {scheme_name!r}; choose one of: {', '.join(scheme_names())}")
    check_embedder_name(embedder)
    check_cells(cells, "samark-layered", True)
    from samark.embed import load_embedder, new_key

    try:
        emb = load_embedder(embedder)
        key = new_key(emb, cells=cells, scheme=scheme_name)
        key.save(output, overwrite=force)
    except SamarkError as exc:
        raise fail(str(exc)) from None
    layout = f"{cells} keyed semantic cells" if cells else "static pivots"
    err.print(
        f"wrote key {key.key_id} for {scheme_name} and embedder {emb.name} to {output} (mode "
        f"0600; its layered mark uses {layout})"
    )
    if key.samark.avoid.size == 0:
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
    engine: EngineOption = None,
    sampler: DeprecatedEngineOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a one-line JSON record (for a .jsonl file).")
    ] = False,
    scheme_name: SchemeOption = None,
    any_scheme: AnySchemeOption = False,
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
    literal: TextFlag = False,
    record_url: RecordOption = None,
    store_text: Annotated[
        bool,
        typer.Option(
            "--store-text",
            help="With --record: store each sentence's text too (off: keyed hashes and "
            "embeddings only).",
        ),
    ] = False,
    cells: CellsOption = None,
) -> None:
    """Continue PROMPT with watermarked sentences, marked with KEY or with a key of KEYRING.

    The keyring's key is its current key, the key LABEL, or the key that writes PAYLOAD.
    PROMPT is a file
    where one exists; a one-word PROMPT that looks like a file name (a '/', or an
    extension such as .txt) but names none is an error, unless --text says it is the
    prompt. With --record, the generated sentences are recorded under a fresh request id
    (docs/provenance.md)."""
    scheme_name = resolve_scheme(scheme_name, key, keyring, any_scheme=any_scheme)
    require_positive(sentences=sentences, candidates=candidates)
    engine = chosen_engine(engine, sampler=sampler)
    written_by = scheme_engine(scheme_name, engine)
    check_record_options(record_url, store_text, keyring)
    check_cells(cells, scheme_name, can(scheme_name, "candidates"))
    from samark.schemes.base import scheme_info

    ablation = scheme_info(scheme_name).ablation
    if dagger and ablation is None:
        able = ", ".join(schemes_that("ablation"))
        raise fail(f"--dagger is an ablation; {scheme_name} has none (use it with {able})")
    text = read_text(prompt, literal=literal).text
    if not text.strip():
        raise fail("the prompt is empty")
    marked_by: dict[str, str] = {}
    flags: tuple[int, ...] = ()
    if keyring is not None:
        key, marked_by, flags = ring_key_file(keyring, label, payload)
    elif label is not None or payload is not None:
        raise fail("--label and --payload choose a key of a --keyring")
    if flags and not can(scheme_name, "payload_flags"):
        raise fail(f"this ring writes payload bits in SAMark's flags; {scheme_name} has none")
    if not can(scheme_name, "candidates"):
        model = written_by.model if written_by and written_by.engine != "openai" else None
        other = load_other_scheme(scheme_name, key, generator=model or generator)
        provenance = open_record(record_url, key) if record_url else None
        with progress() as bar:
            bar.add_task(f"generating with {scheme_name}", total=None)
            try:
                made = other.generate(text, max_new_sentences=sentences, seed=seed)
            except SamarkError as exc:
                raise fail(str(exc)) from None
        record = {**made.to_dict(), "key_id": other.key_id, **marked_by}
        if provenance is not None:
            record["request_id"] = record_served(provenance, made.sentences, store_text=store_text)
        typer.echo(json.dumps(record, ensure_ascii=False) if as_json else made.text)
        return
    name = ablation if dagger and ablation else scheme_name
    scheme = load_scheme(
        key,
        name,
        generator,
        engine,
        candidates=candidates,
        max_new_sentences=sentences,
        adaptive=adaptive,
        payload_flags=flags,
        **cells_field(cells),
    )
    provenance = open_record(record_url, key, scheme.embedder) if record_url else None
    with progress() as bar:
        task = bar.add_task("drawing candidates for sentence 1", total=sentences)
        try:
            result = scheme.generate(
                text, seed=seed, on_sentence=sentence_progress(bar, task, sentences)
            )
        except SamarkError as exc:
            raise fail(str(exc)) from None
    request_id = (
        None
        if provenance is None
        else record_served(provenance, result.sentences, store_text=store_text)
    )
    if as_json:
        record = {**result.to_dict(), "key_id": scheme.key_id, **marked_by}
        record.pop("steps")
        if request_id is not None:
            record["request_id"] = request_id
        typer.echo(json.dumps(record, ensure_ascii=False))  # one line: append to a .jsonl
    else:
        typer.echo(result.text)
    if result.fallbacks:
        err.print(f"fallbacks: {result.fallbacks}")
    if marked_by:
        err.print(f"marked with key {marked_by['key_label']!r} ({scheme.key_id})")
