"""``samark demo``: a watermarked text, a paraphrased copy, a shuffled copy and a human
text, tested."""

from __future__ import annotations

import json
import random
import time
from importlib import resources
from typing import Annotated, Any

import typer
from rich.table import Table

from samark.cli.app import app
from samark.cli.common import (
    err,
    fail,
    out,
    progress,
    sentence_progress,
)
from samark.errors import SamarkError
from samark.models import DEFAULT_EMBEDDER, DEFAULT_GENERATOR

#: the demo's settings, chosen by measurement to finish within a minute on a 2-core CPU
#: (README, "Quickstart"); the paper's are N = 64 and 12-sentence texts from 8B-24B models
DEMO_CANDIDATES = 32


DEMO_SENTENCES = 6


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
        # no markup: rich would read "[eval]" as a style tag and drop it
        out.print(
            "(a paraphrased copy needs offline back-translation: pip install 'samark[eval]')",
            markup=False,
        )
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
