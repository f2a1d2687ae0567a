"""``samark check-key``: a key's (or a keyring's) false-positive rate on human text of
the domain it will mark."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from samark.cli.app import app
from samark.cli.common import KeyOption, StatisticOption, err, fail, refuse_scheme_options
from samark.cli.loading import (
    AnySchemeOption,
    CentringOption,
    KeyringOption,
    SchemeOption,
    can,
    centring_fields,
    human_heads,
    load_other_scheme,
    load_ring_detector,
    load_scheme,
    resolve_scheme,
)
from samark.errors import SamarkError
from samark.text import counted

if TYPE_CHECKING:
    from samark.detection.record_files import BatchDetector

SourceArgument = Annotated[
    str,
    typer.Argument(
        help="Human text of the domain the key will mark: a data set name "
        "(`cnn_dailymail`, `wikipedia_leads`, `jane_austen`, `debian_handbook`, ...) "
        "or a .jsonl / .parquet file of at least 20 records with a text field (--field)."
    ),
]

FieldOption = Annotated[str, typer.Option(help="Text field of JSONL / Parquet records.")]

SentencesOption = Annotated[
    int, typer.Option(help="Score each text's first N sentences (0: whole texts).")
]

LimitOption = Annotated[int, typer.Option(help="At most this many texts.")]

AlphaOption = Annotated[float, typer.Option(help="The level the key will be used at.")]


@dataclass(frozen=True)
class CheckKeyRequest:
    """What ``samark check-key`` was asked: its options, then :meth:`run`."""

    source: SourceArgument
    key: KeyOption
    field: FieldOption
    sentences: SentencesOption
    limit: LimitOption
    alpha: AlphaOption
    statistic: StatisticOption
    scheme_name: SchemeOption
    any_scheme: AnySchemeOption
    keyring: KeyringOption
    centring: CentringOption

    def run(self) -> None:
        scheme_name = resolve_scheme(
            self.scheme_name, self.key, self.keyring, any_scheme=self.any_scheme
        )
        from samark.detection.key_check import MIN_TEXTS

        if self.sentences < 0:
            raise fail(f"--sentences must be 0 (whole texts) or more, got {self.sentences}")
        if self.limit < MIN_TEXTS:
            raise fail(f"--limit must be at least {MIN_TEXTS}: a key check needs {MIN_TEXTS} texts")
        if not 0 < self.alpha < 1:
            raise fail(f"--alpha must be between 0 and 1, got {self.alpha}")
        refuse_scheme_options(scheme_name, statistic=self.statistic, centring=self.centring)
        fields = centring_fields(self.centring)
        targets: list[tuple[str | None, Path]] = [(None, self.key)]
        if self.keyring is not None:
            from samark.keys.keyring import Keyring

            try:
                ring = Keyring.load(self.keyring)
            except SamarkError as exc:
                raise fail(str(exc)) from None
            targets = [(e.label, ring.path / e.file) for e in ring.entries]
        texts = human_heads(self.source, self.field, self.sentences, self.limit)
        scorable = sum(1 for text in texts if text.strip())
        if scorable < MIN_TEXTS:  # before any model loads
            each = f" of at least {min(3, self.sentences)} sentences" if self.sentences else ""
            raise fail(
                f"a key check needs at least {MIN_TEXTS} human texts{each}; "
                f"{self.source} has {scorable}"
            )
        holds = True
        with contextlib.ExitStack() as stack:
            for label, path in targets:
                if can(scheme_name, "candidates"):
                    scheme = load_scheme(
                        path, scheme_name, statistic=self.statistic, alpha=self.alpha, **fields
                    )
                else:
                    scheme = load_other_scheme(scheme_name, path, alpha=self.alpha)
                if scheme.embedder is not None:
                    scheme.embedder.progress_over = 2000  # hundreds of texts take minutes
                    stack.enter_context(scheme.embedder.remembering())  # once for every key
                name = f"key {scheme.key_id}" + (f" ({label})" if label else "")
                err.print(f"scoring {len(texts)} human texts with {name} ...")
                holds &= _report_check(scheme, texts, self.alpha, name, {"key_label": label})
            if self.keyring is not None:
                detector = load_ring_detector(
                    self.keyring, scheme_name, statistic=self.statistic, alpha=self.alpha, **fields
                )
                name = f"the ring ({counted(len(targets), 'key')}, {detector.method})"
                holds &= _report_check(detector, texts, self.alpha, name, {"ring": True})
        raise typer.Exit(0 if holds else 1)


@app.command("check-key")
def check_key(
    source: SourceArgument,
    key: KeyOption = Path("samark.key"),
    field: FieldOption = "text",
    sentences: SentencesOption = 10,
    limit: LimitOption = 500,
    alpha: AlphaOption = 0.01,
    statistic: StatisticOption = None,
    scheme_name: SchemeOption = None,
    any_scheme: AnySchemeOption = False,
    keyring: KeyringOption = None,
    centring: CentringOption = None,
) -> None:
    """Measure KEY's false-positive rate on human text of your domain.

    A key that leans towards a domain's mean direction flags more of it than alpha
    (docs/statistics.md). With --keyring, every key of the ring and the ring's family-wise
    answer. Check the --scheme you mark with (default samark). Needs at least 20 human
    texts. Exits 0 if each count of p < alpha is within the 99.9% binomial bound and the
    p-values are not below uniform (one-sided KS, at 0.001), 1 if not, 2 on an error (a
    record that cannot be read or has no text field, named by its line; too few texts)."""
    CheckKeyRequest(
        source=source,
        key=key,
        field=field,
        sentences=sentences,
        limit=limit,
        alpha=alpha,
        statistic=statistic,
        scheme_name=scheme_name,
        any_scheme=any_scheme,
        keyring=keyring,
        centring=centring,
    ).run()


def _report_check(
    detector: BatchDetector, texts: list[str], alpha: float, name: str, tag: dict[str, object]
) -> bool:
    """One key check: its JSON line, its verdict on stderr, and whether it holds."""
    from samark.detection.key_check import check_key as run_check

    try:
        result = run_check(detector, texts, alpha=alpha)
    except (SamarkError, ValueError) as exc:
        raise fail(str(exc)) from None
    typer.echo(json.dumps({**{k: v for k, v in tag.items() if v}, **result.to_dict()}))
    low, high = result.fpr_interval
    if result.holds:
        err.print(
            f"[bold green]holds[/] for {name}: {result.flagged} of {result.texts} human texts "
            f"at p < {alpha} ({100 * result.fpr:.1f}%; 95% interval {100 * low:.1f}-"
            f"{100 * high:.1f}%), bound {result.bound}"
        )
    else:
        err.print(
            f"[bold red]does not hold[/] for {name}: {result.flagged} of {result.texts} human "
            f"texts at p < {alpha} ({100 * result.fpr:.1f}%; 95% interval {100 * low:.1f}-"
            f"{100 * high:.1f}%; bound {result.bound}; KS p = {result.ks_pvalue:.2g}). "
            "Detect with a centring reference built from other human text of this domain "
            "(`samark centring build`, then --centring), or make another key and check it."
        )
    return bool(result.holds)
