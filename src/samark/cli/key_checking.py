"""``samark check-key``: a key's (or a keyring's) false-positive rate on human text of
the domain it will mark."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from samark.cli.app import app
from samark.cli.common import KeyOption, counted, err, fail
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


@app.command("check-key")
def check_key(
    source: Annotated[
        str,
        typer.Argument(
            help="Human text of the domain the key will mark: a data set name "
            "(`cnn_dailymail`, `wikipedia_leads`, `jane_austen`, `debian_handbook`, ...) "
            "or a .jsonl / .parquet file of at least 20 records with a text field (--field)."
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
    scheme_name = resolve_scheme(scheme_name, key, keyring, any_scheme=any_scheme)
    from samark.detection.key_check import MIN_TEXTS

    if sentences < 0:
        raise fail(f"--sentences must be 0 (whole texts) or more, got {sentences}")
    if limit < MIN_TEXTS:
        raise fail(f"--limit must be at least {MIN_TEXTS}: a key check needs {MIN_TEXTS} texts")
    if not 0 < alpha < 1:
        raise fail(f"--alpha must be between 0 and 1, got {alpha}")
    if (statistic is not None or centring is not None) and not can(scheme_name, "statistics"):
        raise fail("--statistic and --centring are SAMark's; leave them out for " + scheme_name)
    fields = centring_fields(centring)
    targets: list[tuple[str | None, Path]] = [(None, key)]
    if keyring is not None:
        from samark.keys.keyring import Keyring

        try:
            ring = Keyring.load(keyring)
        except SamarkError as exc:
            raise fail(str(exc)) from None
        targets = [(e.label, ring.path / e.file) for e in ring.entries]
    texts = human_heads(source, field, sentences, limit)
    scorable = sum(1 for text in texts if text.strip())
    if scorable < MIN_TEXTS:  # before any model loads
        each = f" of at least {min(3, sentences)} sentences" if sentences else ""
        raise fail(
            f"a key check needs at least {MIN_TEXTS} human texts{each}; {source} has {scorable}"
        )
    holds = True
    with contextlib.ExitStack() as stack:
        for label, path in targets:
            if can(scheme_name, "candidates"):
                scheme = load_scheme(path, scheme_name, statistic=statistic, alpha=alpha, **fields)
            else:
                scheme = load_other_scheme(scheme_name, path, alpha=alpha)
            if scheme.embedder is not None:
                scheme.embedder.progress_over = 2000  # hundreds of texts take minutes
                stack.enter_context(scheme.embedder.remembering())  # once for every key
            name = f"key {scheme.key_id}" + (f" ({label})" if label else "")
            err.print(f"scoring {len(texts)} human texts with {name} ...")
            holds &= _report_check(scheme, texts, alpha, name, {"key_label": label})
        if keyring is not None:
            detector = load_ring_detector(
                keyring, scheme_name, statistic=statistic, alpha=alpha, **fields
            )
            name = f"the ring ({counted(len(targets), 'key')}, {detector.method})"
            holds &= _report_check(detector, texts, alpha, name, {"ring": True})
    raise typer.Exit(0 if holds else 1)


def _report_check(
    detector: Any, texts: list[str], alpha: float, name: str, tag: dict[str, Any]
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
