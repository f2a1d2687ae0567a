"""``samark keygen`` and ``samark generate``: keys, and watermarked text."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

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
from samark.cli.manifest_options import C2paCertOption, C2paKeyOption, manifest_signer
from samark.cli.record import RecordOption, check_record_options, open_record, record_served
from samark.errors import SamarkError
from samark.keys.samark_material import DEFAULT_CELLS

if TYPE_CHECKING:
    from samark.sampling.engines import EngineSpec
from samark.models import DEFAULT_EMBEDDER, DEFAULT_GENERATOR
from samark.provenance.c2pa_manifest import ManifestSigner
from samark.schemes.catalog import DEFAULT_SCHEME


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
            help="Keyed semantic cells of the key's mark (0: the paper's static pivots); a "
            "scheme that declares no --cells ignores them (`samark schemes list`)."
        ),
    ] = DEFAULT_CELLS,
    scheme_name: Annotated[
        str,
        typer.Option(
            "--scheme",
            help="The scheme the key is made for (written in the key file): generate, detect, "
            "serve and page use it unless told otherwise.",
        ),
    ] = DEFAULT_SCHEME,
    hash_key: Annotated[
        int | None,
        typer.Option(
            help="A reference implementation's integer key for a green-list scheme (e.g. "
            "MarkLLM's and transformers' 15485863): they mark and detect as the reference "
            "does (docs/baselines.md). Secret, like the key.",
        ),
    ] = None,
) -> None:
    """Write a new secret key (owner-only permissions) bound to an embedder."""
    check_new_file(output, "key file", force=force)
    from samark.keys import HASH_KEY_SCHEMES, MAX_HASH_KEY
    from samark.schemes import scheme_names

    if scheme_name not in scheme_names():
        raise fail(f"unknown scheme {scheme_name!r}; choose one of: {', '.join(scheme_names())}")
    if hash_key is not None and scheme_name not in HASH_KEY_SCHEMES:
        raise fail(f"--hash-key is for {' and '.join(HASH_KEY_SCHEMES)}, not {scheme_name}")
    if hash_key is not None and not 0 < hash_key <= MAX_HASH_KEY:
        raise fail(f"--hash-key must be in [1, {MAX_HASH_KEY}]")
    check_embedder_name(embedder)
    check_cells(cells, DEFAULT_SCHEME)
    from samark.embed import load_embedder, new_key

    try:
        emb = load_embedder(embedder)
        key = new_key(emb, cells=cells, scheme=scheme_name).with_hash_key(hash_key)
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


PromptArgument = Annotated[
    str | None, typer.Argument(help="Prompt text, a file, '@file', or '-' for stdin.")
]

SentencesOption = Annotated[
    int,
    typer.Option(
        help="Sentences to generate. The default scheme at 32 candidates takes about 10 s a "
        "sentence on a 2-core CPU (median; 7-17 s), so 6 take 1-2 minutes after the models "
        "load. The paper's texts have 12; the mark is weaker on shorter texts (docs/parameters.md)."
    ),
]

CandidatesOption = Annotated[
    int | None,
    typer.Option(
        help="Candidates per sentence (N; default: the scheme's own, 32 for the default "
        "scheme). A sentence's time grows with N.",
        show_default=False,
    ),
]

SeedOption = Annotated[int | None, typer.Option(help="Seed: makes the run reproducible.")]

GeneratorOption = Annotated[str, typer.Option(help="Generator preset or folder.")]

DaggerOption = Annotated[
    bool, typer.Option(help="The scheme's ablation (the paper's dagger): diversity terms off.")
]

AdaptiveOption = Annotated[
    bool, typer.Option(help="Adaptive budget: stop drawing once a strong match is found.")
]

AsJsonOption = Annotated[
    bool, typer.Option("--json", help="Print a one-line JSON record (for a .jsonl file).")
]

LabelOption = Annotated[
    str | None, typer.Option(help="With --keyring: mark with this key (a deployment).")
]

PayloadOption = Annotated[
    int | None,
    typer.Option(help="With --keyring of 2**b keys: write this b-bit value (a tenant or user id)."),
]

StoreTextOption = Annotated[
    bool,
    typer.Option(
        "--store-text",
        help="With --record: store each sentence's text too (off: keyed hashes and "
        "embeddings only).",
    ),
]


def candidates_field(candidates: int | None) -> dict[str, Any]:
    """``--candidates`` as a config field: none when left out (the scheme's default)."""
    return {} if candidates is None else {"candidates": candidates}


@dataclass(frozen=True)
class GenerateRequest:
    """What ``samark generate`` was asked: its options, then :meth:`run`."""

    prompt: PromptArgument
    key: KeyOption
    sentences: SentencesOption
    candidates: CandidatesOption
    seed: SeedOption
    generator: GeneratorOption
    dagger: DaggerOption
    adaptive: AdaptiveOption
    engine: EngineOption
    sampler: DeprecatedEngineOption
    as_json: AsJsonOption
    scheme_name: SchemeOption
    any_scheme: AnySchemeOption
    keyring: KeyringOption
    label: LabelOption
    payload: PayloadOption
    literal: TextFlag
    record_url: RecordOption
    store_text: StoreTextOption
    cells: CellsOption
    c2pa_cert: C2paCertOption = None
    c2pa_key: C2paKeyOption = None

    def run(self) -> None:
        key = self.key  # or a keyring's key file, where the ring chooses it
        scheme_name = resolve_scheme(
            self.scheme_name, key, self.keyring, any_scheme=self.any_scheme
        )
        require_positive(sentences=self.sentences)
        if self.candidates is not None:
            require_positive(candidates=self.candidates)
        engine = chosen_engine(self.engine, sampler=self.sampler)
        written_by = scheme_engine(scheme_name, engine)
        check_record_options(self.record_url, self.store_text, self.keyring)
        check_cells(self.cells, scheme_name)
        from samark.schemes.base import scheme_info

        ablation = scheme_info(scheme_name).ablation
        if self.dagger and ablation is None:
            able = ", ".join(schemes_that("ablation"))
            raise fail(f"--dagger is an ablation; {scheme_name} has none (use it with {able})")
        text = read_text(self.prompt, literal=self.literal).text
        if not text.strip():
            raise fail("the prompt is empty")
        signer = manifest_signer(self.c2pa_cert, self.c2pa_key)  # before any model loads
        marked_by: dict[str, str | int] = {}
        flags: tuple[int, ...] = ()
        if self.keyring is not None:
            key, marked_by, flags = ring_key_file(self.keyring, self.label, self.payload)
        elif self.label is not None or self.payload is not None:
            raise fail("--label and --payload choose a key of a --keyring")
        if flags and not can(scheme_name, "payload_flags"):
            raise fail(f"this ring writes payload bits in a flag pattern; {scheme_name} has none")
        if not can(scheme_name, "candidates"):
            return self._generate_other(scheme_name, key, written_by, text, marked_by, signer)
        name = ablation if self.dagger and ablation else scheme_name
        scheme = load_scheme(
            key,
            name,
            self.generator,
            engine,
            **candidates_field(self.candidates),
            max_new_sentences=self.sentences,
            adaptive=self.adaptive,
            payload_flags=flags,
            **cells_field(self.cells),
        )
        provenance = open_record(self.record_url, key, scheme.embedder) if self.record_url else None
        with progress() as bar:
            task = bar.add_task(
                f"drawing candidates for sentence 1 of {self.sentences}", total=self.sentences
            )
            try:
                result = scheme.generate(
                    text, seed=self.seed, on_sentence=sentence_progress(bar, task, self.sentences)
                )
            except SamarkError as exc:
                raise fail(str(exc)) from None
        request_id = (
            None
            if provenance is None
            else record_served(provenance, result.sentences, store_text=self.store_text)
        )
        out = _sealed(signer, result.text, scheme.key_id, self.generator)
        if self.as_json:
            record = {**result.to_dict(), "key_id": scheme.key_id, **marked_by, "text": out}
            record.pop("steps")
            if request_id is not None:
                record["request_id"] = request_id
            typer.echo(json.dumps(record, ensure_ascii=False))  # one line: append to a .jsonl
        else:
            typer.echo(out)
        if result.fallbacks:
            err.print(f"fallbacks: {result.fallbacks}")
        if marked_by:
            err.print(f"marked with key {marked_by['key_label']!r} ({scheme.key_id})")

    def _generate_other(
        self,
        scheme_name: str,
        key: Path,
        written_by: EngineSpec | None,
        text: str,
        marked_by: dict[str, str | int],
        signer: ManifestSigner | None = None,
    ) -> None:
        """A scheme that writes through an LM's logits (no candidates): one generation,
        recorded where asked."""
        model = written_by.model if written_by and written_by.engine != "openai" else None
        other = load_other_scheme(scheme_name, key, generator=model or self.generator)
        provenance = open_record(self.record_url, key) if self.record_url else None
        with progress() as bar:
            bar.add_task(f"generating with {scheme_name}", total=None)
            try:
                made = other.generate(text, max_new_sentences=self.sentences, seed=self.seed)
            except SamarkError as exc:
                raise fail(str(exc)) from None
        record = {**made.to_dict(), "key_id": other.key_id, **marked_by}
        if provenance is not None:
            record["request_id"] = record_served(
                provenance, made.sentences, store_text=self.store_text
            )
        record["text"] = _sealed(signer, made.text, other.key_id, model or self.generator)
        typer.echo(json.dumps(record, ensure_ascii=False) if self.as_json else record["text"])


def _sealed(signer: ManifestSigner | None, text: str, key_id: str | None, model: str) -> str:
    """``text``, with a signed C2PA manifest where --c2pa-cert and --c2pa-key ask."""
    if signer is None or not text:
        return text
    try:
        return signer.sign(text, model=model, key_id=key_id)
    except SamarkError as exc:
        raise fail(str(exc)) from None


@app.command()
def generate(
    prompt: PromptArgument = None,
    key: KeyOption = Path("samark.key"),
    sentences: SentencesOption = 6,
    candidates: CandidatesOption = None,
    seed: SeedOption = None,
    generator: GeneratorOption = DEFAULT_GENERATOR,
    dagger: DaggerOption = False,
    adaptive: AdaptiveOption = False,
    engine: EngineOption = None,
    sampler: DeprecatedEngineOption = None,
    as_json: AsJsonOption = False,
    scheme_name: SchemeOption = None,
    any_scheme: AnySchemeOption = False,
    keyring: KeyringOption = None,
    label: LabelOption = None,
    payload: PayloadOption = None,
    literal: TextFlag = False,
    record_url: RecordOption = None,
    store_text: StoreTextOption = False,
    cells: CellsOption = None,
    c2pa_cert: C2paCertOption = None,
    c2pa_key: C2paKeyOption = None,
) -> None:
    """Continue PROMPT with watermarked sentences, marked with KEY or with a key of KEYRING.

    The keyring's key is its current key, the key LABEL, or the key that writes PAYLOAD.

    PROMPT is a file where one exists; a one-word PROMPT that looks like a file name (a
    '/', or an extension such as .txt) but names none is an error, unless --text says it
    is the prompt.

    With --record, the generated sentences are recorded under a fresh request id
    (docs/provenance.md). With --c2pa-cert and --c2pa-key, the text ends with a signed
    C2PA manifest (docs/compliance.md)."""
    GenerateRequest(
        prompt=prompt,
        key=key,
        sentences=sentences,
        candidates=candidates,
        seed=seed,
        generator=generator,
        dagger=dagger,
        adaptive=adaptive,
        engine=engine,
        sampler=sampler,
        as_json=as_json,
        scheme_name=scheme_name,
        any_scheme=any_scheme,
        keyring=keyring,
        label=label,
        payload=payload,
        literal=literal,
        record_url=record_url,
        store_text=store_text,
        cells=cells,
        c2pa_cert=c2pa_cert,
        c2pa_key=c2pa_key,
    ).run()
