"""``samark demo``: a watermarked text, a paraphrased copy, a shuffled copy and a human
text, tested."""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from samark.cli.app import app
from samark.cli.common import (
    LineProgress,
    check_cells,
    err,
    fail,
    out,
    require_positive,
    sentence_progress,
)
from samark.errors import SamarkError
from samark.keys.samark_material import DEFAULT_CELLS
from samark.models import DEFAULT_EMBEDDER, DEFAULT_GENERATOR
from samark.schemes.catalog import DEFAULT_SCHEME
from samark.text import counted

if TYPE_CHECKING:
    from samark.detection_result import Detection
    from samark.embed import Embedder
    from samark.keys import WatermarkKey
    from samark.schemes.base import Generation, Watermark

#: the demo's settings (the paper's are N = 64 and 12-sentence texts from 8B-24B models)
DEMO_CANDIDATES = 32
#: how long the demo takes, as the README, docs/usage.md and --help say it
DEMO_TIME = "about 100 s on a quiet 2-core CPU"


DEMO_SENTENCES = 6
#: keyed semantic cells (0: the paper's static pivots): the default scheme's for a new key
DEMO_CELLS = DEFAULT_CELLS


SentencesOption = Annotated[int, typer.Option(help="Sentences to generate.")]

CandidatesOption = Annotated[
    int, typer.Option(help="Candidates per sentence (N; the paper's is 64).")
]

SeedOption = Annotated[
    int | None,
    typer.Option(
        help="Seed: the same seed gives the same key, text and p-values (the key is "
        "derived from it: a demo key, never a secret)."
    ),
]

CellsOption = Annotated[
    int,
    typer.Option(
        help="Keyed semantic cells (the default scheme's for a new key; 0: the "
        "paper's static pivots; docs/layered.md, 'Keyed semantic cells')."
    ),
]

ThreadsOption = Annotated[
    int | None,
    typer.Option(
        help="Torch threads (default: one fewer than the CPUs this process may use, at "
        "least 1, so that other work on the machine slows the demo gracefully)."
    ),
]


@dataclass(frozen=True)
class DemoRequest:
    """What ``samark demo`` was asked: its options, then :meth:`run`."""

    sentences: SentencesOption
    candidates: CandidatesOption
    seed: SeedOption
    cells: CellsOption
    threads: ThreadsOption

    def run(self) -> None:
        require_positive(sentences=self.sentences, candidates=self.candidates)
        check_cells(self.cells, DEFAULT_SCHEME)
        if self.threads is not None:
            require_positive(threads=self.threads)
        import torch

        torch.set_num_threads(self.threads or demo_threads())
        start = time.monotonic()
        keyed = (
            "a throwaway key" if self.seed is None else f"a demo key derived from seed {self.seed}"
        )
        layout = (
            f" in each sentence's own keyed cell, {self.cells} cells"
            if self.cells
            else ", static pivots"
        )
        err.print(
            f"demo: {DEFAULT_GENERATOR} writes {counted(self.sentences, 'sentence')} with "
            f"{DEFAULT_SCHEME}: {counted(self.candidates, 'candidate')} each, sampled under a "
            f"keyed green-list token layer, and it picks one whose meaning (embedder "
            f"{DEFAULT_EMBEDDER}, c = 2 channels{layout}) leans the key's way; {keyed}, never "
            f"written. "
            f"The paper: N = 64, 12-sentence texts, 8B-24B generators (docs/parameters.md). "
            f"{counted(torch.get_num_threads(), 'torch thread')}.",
            highlight=False,
            soft_wrap=True,
        )
        gen, scheme, data = self._write(start)
        texts = demo_texts(gen.text, gen.sentences, self.seed, data["human"])
        paraphrased = dict(texts).get("paraphrased")
        out.print(_results_table((label, scheme.detect(text)) for label, text in texts))
        if paraphrased is not None:
            out.print(
                "[bold]Paraphrased copy[/] (Doc-P: sentences split, back-translated through "
                f"Portuguese, merged and moved): {paraphrased}\n",
                highlight=False,
                soft_wrap=True,
            )
        else:
            # no markup: rich would read "[eval]" as a style tag and drop it
            out.print(
                "(a paraphrased copy needs offline back-translation: pip install 'samark[eval]')",
                markup=False,
                soft_wrap=True,
            )
        out.print(
            f"generation {gen.seconds:.0f} s ({gen.tokens_sampled} tokens sampled for "
            f"{gen.output_tokens} output tokens), total {time.monotonic() - start:.0f} s; "
            f"fallbacks: {gen.fallbacks or 'none'}",
            highlight=False,
            soft_wrap=True,
        )

    def _write(self, start: float) -> tuple[Generation, Watermark, dict[str, str]]:
        """Load the models and write the marked continuation, shown as it grows; returns
        the generation, the scheme and the demo's data."""
        from samark.embed import load_embedder
        from samark.schemes import create_scheme

        data = demo_data()
        err.print("loading the embedder ...", highlight=False)
        try:
            embedder = load_embedder(DEFAULT_EMBEDDER)
            scheme = create_scheme(
                DEFAULT_SCHEME,
                key=demo_key(embedder, self.seed, self.cells),
                embedder=embedder,
                candidates=self.candidates,
            )
            err.print(
                f"loading the generator ... ({time.monotonic() - start:.0f} s)", highlight=False
            )
            scheme.engine  # noqa: B018 -- load it now, not inside the first sentence's timing
        except SamarkError as exc:
            raise fail(f"{exc} (run `samark models install`)") from None
        out.print(f"[bold]Prompt:[/] {data['prompt']}\n", highlight=False, soft_wrap=True)
        with _DemoProgress() if err.is_terminal else LineProgress() as bar:
            task = bar.add_task("drawing candidates for sentence 1", total=self.sentences)
            show = sentence_progress(bar, task, self.sentences)

            def on_sentence(sentence: str, step: Mapping[str, object]) -> None:
                if isinstance(bar, _DemoProgress):
                    bar.written.append(sentence)
                show(sentence, step)

            gen = scheme.generate(
                data["prompt"],
                max_new_sentences=self.sentences,
                seed=self.seed,
                on_sentence=on_sentence,
            )
        # the text once, whole, after the progress display is gone: never split or wrapped
        out.print(
            f"[bold]Watermarked continuation:[/] {gen.text}\n", highlight=False, soft_wrap=True
        )
        return gen, scheme, data


@app.command()
def demo(
    sentences: SentencesOption = DEMO_SENTENCES,
    candidates: CandidatesOption = DEMO_CANDIDATES,
    seed: SeedOption = None,
    cells: CellsOption = DEMO_CELLS,
    threads: ThreadsOption = None,
) -> None:
    """Mark a news continuation with a throwaway key, then test it and attacked copies of it.

    The mark is the default scheme's (a semantic and a token layer); the continuation, a paraphrased
    copy (with samark[eval]), a sentence-shuffled copy and a human text are tested (about
    100 s on a quiet 2-core CPU: README, Quickstart)."""
    DemoRequest(
        sentences=sentences,
        candidates=candidates,
        seed=seed,
        cells=cells,
        threads=threads,
    ).run()


def demo_threads() -> int:
    """Torch threads for the demo: one fewer than the CPUs this process may use, at least
    one. A torch thread that waits for a core another process holds stalls the others at
    every barrier (the measurement: docs/usage.md, "The demo")."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, cpus - 1)


def demo_data() -> dict[str, str]:
    """The demo's prompt and its human continuation (``prompt``, ``human``)."""
    return dict(json.loads(resources.files("samark.resources").joinpath("demo.json").read_text()))


def demo_texts(
    text: str, sentences: Sequence[str], seed: int | None, human: str
) -> list[tuple[str, str]]:
    """What the demo tests, labelled: the watermarked ``text``, its paraphrased copy (where
    offline back-translation is installed), its ``sentences`` shuffled (seeded) and the
    human text."""
    shuffled = list(sentences)
    random.Random(seed).shuffle(shuffled)
    texts = [("watermarked", text)]
    paraphrased = demo_paraphrase(text, seed or 0)
    if paraphrased is not None:
        texts.append(("paraphrased", paraphrased))
    return [*texts, ("sentences shuffled", " ".join(shuffled)), ("human", human)]


def demo_key(embedder: Embedder, seed: int | None, cells: int = DEFAULT_CELLS) -> WatermarkKey:
    """The demo's key: a new random one, or with ``seed`` one derived from it (the same
    seed, the same key: the run is reproducible; a derived key is public, not a secret).
    Its pivots avoid the same reference directions as ``samark keygen``'s."""
    from samark.embed import new_key
    from samark.keys import WatermarkKey
    from samark.keys.samark_material import PivotDraw, new_null_draws

    if seed is None:
        return new_key(embedder, cells=cells)
    secret = hashlib.sha256(f"samark/demo-key/{seed}".encode()).digest()
    draw = PivotDraw.avoiding(embedder.reference_directions(), cells, new_null_draws(cells))
    return WatermarkKey(secret, embedder.identity, draw)


def _results_table(results: Iterable[tuple[str, Detection]]) -> Table:
    """The detections, one row per text; no column wraps its label or number (fits 80
    columns)."""
    table = Table(title="Detection (p < 0.01 means watermarked)", title_justify="left")
    table.add_column("text", no_wrap=True)
    for col in ("sentences", "p-value", "marked", "semantic p", "token p"):
        table.add_column(col, justify="right", no_wrap=True)
    for label, d in results:
        table.add_row(
            label,
            str(d.n_units),
            f"{d.p_value:.2g}",
            "yes" if d.is_watermarked else "no",
            f"{d.details['p_semantic']:.3f}",
            f"{d.details['p_token']:.2g}",
        )
    return table


class _DemoProgress(Progress):
    """On a terminal: the continuation as it is written, with the bar below it, in one
    live region (so the bar never overwrites or splits the text); transient, so the text
    is then printed once, whole, on stdout."""

    def __init__(self) -> None:
        self.written: list[str] = []  # before Progress, which may draw at once
        super().__init__(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        )

    def get_renderables(self) -> Iterable[RenderableType]:
        written = " ".join(sentence.strip() for sentence in self.written)
        text = Text.assemble(("Watermarked continuation: ", "bold"), written)
        yield text
        yield self.make_tasks_table(self.tasks)


def demo_paraphrase(text: str, seed: int) -> str | None:
    """``text`` after the Doc-P (local) attack, or None where its extra is not installed."""
    try:
        from samark.evaluation.attacks import create_attack

        return str(create_attack("doc-p-local").apply(text, seed=seed))
    except (ImportError, SamarkError):
        return None
