"""A run's report as markdown: a header, then one section per table (detection, human
FPR by corpus, power against length, quality, efficiency, attack fidelity, signal
diagnostics, where the margin comes from)."""

from __future__ import annotations

import math
import platform
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from samark.evaluation.experiment import NO_ATTACK, Experiment
from samark.evaluation.fidelity import MEANING_PRESERVING
from samark.evaluation.report.tables import (
    decision_tag,
    fpr_tag,
    human_fpr_tag,
    unfaithful_attacks,
)
from samark.evaluation.runner import Run


def _pct(x: float) -> str:
    return "–" if x is None or not math.isfinite(x) else f"{100 * x:.1f}"


def _num(x: float, digits: int = 2) -> str:
    return "–" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def _judge_method(run: Run) -> str:
    """How the pairwise verdicts were reached, and how often the judge chose position A."""
    recs = [r for r in run.current_records(run.quality) if r["key"][0] == "judge"]
    positions = [p for r in recs for p in r.get("positions") or [] if p in ("A", "B")]
    if not recs:
        return ""
    local = any("logprobs" in r for r in recs)
    text = (
        "The local judge answers by likelihood in both A/B orders; a win or a loss needs both "
        "orders to agree, anything else is a tie; it does not rank (AvgRank needs an endpoint)."
        if local
        else "One blind judgement per text, A/B order drawn at random (the paper's protocol)."
    )
    if positions:
        share = positions.count("A") / len(positions)
        text += f" The judge chose position A in {100 * share:.0f}% of its verdicts."
    return text


def _scheme_table(
    det: pd.DataFrame,
    attacks: list[str],
    head: Callable[[str], str],
    cell: Callable[[pd.Series], str],
    lead: tuple[str, Callable[[pd.DataFrame], str]] | None = None,
) -> list[str]:
    """A markdown table with one row per scheme and one column per attack (headed by
    ``head(attack)``): ``cell`` of the scheme's detection row for that attack (blank where
    it has no records), after an optional ``(header, cell)`` lead column."""
    heads = ["scheme", *([lead[0]] if lead else []), *map(head, attacks)]
    rows = ["| " + " | ".join(heads) + " |", "|---" * len(heads) + "|"]
    for scheme, sub in det.groupby("scheme", sort=False):
        cells = [lead[1](sub)] if lead else []
        for a in attacks:
            r = sub[sub["attack"] == a]
            cells.append(cell(r.iloc[0]) if len(r) else "")
        rows.append(f"| {scheme} | " + " | ".join(cells) + " |")
    return rows


def _detection_tables(
    exp: Experiment, det: pd.DataFrame, attacks: list[str], head: Callable[[str], str]
) -> list[str]:
    """TP@FP / AUC, TP@FP with its interval, and the calibrated decision, one row per
    scheme of ``det``."""
    fprs = [fpr_tag(f) for f in exp.metrics.fprs]
    lines = _scheme_table(
        det,
        attacks,
        head,
        lambda r: "/".join(_pct(r[f]) for f in fprs) + f"/{_pct(r['auc'])} (n={r['n_positive']})",
    )
    first = fprs[0]
    decided = decision_tag(exp.metrics.alpha)
    lines += ["", f"{first.replace('tp@fp', 'TP@FP')} with its 95% bootstrap interval:", ""]
    lines += _scheme_table(
        det,
        attacks,
        head,
        lambda r: f"{_pct(r[first])} [{_pct(r[first + '_lo'])}, {_pct(r[first + '_hi'])}]",
    )
    lines += [
        "",
        f"## Calibrated decision p < {exp.metrics.alpha:g}",
        "",
        "The fixed rule every detector ships: its false-positive rate measured on the human "
        "texts, and the share of texts it flags.",
        "",
    ]
    lines += _scheme_table(
        det,
        attacks,
        head,
        lambda r: _pct(r[decided]),
        lead=("human FPR", lambda sub: _pct(sub.iloc[0][human_fpr_tag(exp.metrics.alpha)])),
    )
    return lines


@dataclass(frozen=True)
class ReportTables:
    """The tables a report is written from (each may be empty)."""

    detection: pd.DataFrame
    quality: pd.DataFrame
    efficiency: pd.DataFrame
    attacks: pd.DataFrame
    signal: pd.DataFrame
    generation_signal: pd.DataFrame
    corpora: pd.DataFrame
    by_length: pd.DataFrame


def markdown_report(run: Run, t: ReportTables, plots: list[str]) -> str:
    """The report's markdown: its header, then one section per non-empty table."""
    unfaithful = unfaithful_attacks(t.attacks)

    def head(attack: str) -> str:
        return f"{attack} *" if attack in unfaithful else attack

    lines = _header(run)
    if not t.detection.empty:
        lines += _detection_section(run, t.detection, head, bool(unfaithful))
    if not t.corpora.empty:
        lines += _corpora_section(run, t.corpora)
    if not t.by_length.empty:
        lines += _length_section(run, t.by_length)
    if not t.quality.empty:
        lines += _quality_section(run, t.quality)
    if not t.efficiency.empty:
        lines += _efficiency_section(run, t.efficiency)
    if not t.attacks.empty:
        lines += _fidelity_section(t.attacks)
    if not t.signal.empty:
        lines += _signal_section(t.signal, head)
    if not t.generation_signal.empty:
        lines += _generation_signal_section(t.generation_signal)
    if plots:
        lines += ["Plots: " + ", ".join(f"[`{p}`]({p})" for p in plots) + ".", ""]
    return "\n".join(lines)


def _header(run: Run) -> list[str]:
    exp = run.experiment
    return [
        f"# Experiment `{exp.name}`",
        "",
        f"Machine: {platform.platform()}, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}.",
        f"Data: `{exp.dataset.name}`, {exp.dataset.sentences} sentences per text; "
        f"generator `{exp.generator}`; SAMark embedder `{exp.embedder}`.",
        _compute_line(run),
        "",
    ]


def _detection_section(
    run: Run, det: pd.DataFrame, head: Callable[[str], str], unfaithful: bool
) -> list[str]:
    """TP at each FPR and AUC per row and attack; research rows in their own part."""
    exp = run.experiment
    lines: list[str] = []
    fprs = [fpr_tag(f) for f in exp.metrics.fprs]
    n_neg = int(det["n_negative"].max())
    lines += [
        "## Detection: " + " / ".join(f.replace("tp@fp", "TP@FP") for f in fprs) + " / AUC (%)",
        "",
        f"Empirical thresholds on {n_neg} human texts: FP 1% rests on about "
        f"{max(n_neg // 100, 1)} of them, so the 1% column is coarse (95% bootstrap "
        "intervals in `detection.csv`). n = watermarked texts per cell."
        + (
            f" * = not meaning-preserving (median sentence-aligned similarity below "
            f"{MEANING_PRESERVING:.2f}, see Attack fidelity): a rewrite, not a paraphrase "
            "result."
            if unfaithful
            else ""
        ),
        "",
    ]
    fewer = det.groupby("scheme")["n_negative"].min()
    fewer = fewer[fewer < n_neg]
    if not fewer.empty:
        lines += [
            "Rows whose detector scored fewer human negatives (a row's `human_negatives`: "
            "a costly detector), with thresholds and FPR from those alone: "
            + ", ".join(f"{label} ({int(n)})" for label, n in fewer.items())
            + ".",
            "",
        ]
    attacks = [a for a in [NO_ATTACK, *[a.label for a in exp.attacks]] if a in set(det["attack"])]
    research = {spec.label for spec in exp.schemes if spec.research}
    lines += _detection_tables(exp, det[~det["scheme"].isin(research)], attacks, head)
    lines.append("")
    if research & set(det["scheme"]):
        lines += [
            "## Research rows",
            "",
            "Rows marked `research = true` in the experiment (lever studies: adaptive "
            "budgets, margins, channels, pivot spaces), with the same human negatives and "
            "attacks as the rows above; their plots are the `-research` files.",
            "",
        ]
        lines += _detection_tables(exp, det[det["scheme"].isin(research)], attacks, head)
        lines.append("")
    return lines


def _corpora_section(run: Run, corpora: pd.DataFrame) -> list[str]:
    exp = run.experiment
    lines: list[str] = []
    names = list(dict.fromkeys(corpora["corpus"]))
    sizes = corpora.groupby("corpus")["n"].max()
    lines += [
        f"### Human FPR at p < {exp.metrics.alpha:g} by corpus",
        "",
        "| scheme | " + " | ".join(f"{c} (n={sizes[c]})" for c in names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for scheme, sub in corpora.groupby("scheme", sort=False):
        by = dict(zip(sub["corpus"], sub["fpr"], strict=True))
        lines.append(
            f"| {scheme} | " + " | ".join(_pct(by[c]) if c in by else "" for c in names) + " |"
        )
    lines.append("")
    return lines


def _quality_section(run: Run, qual: pd.DataFrame) -> list[str]:
    exp = run.experiment
    lines: list[str] = []
    judge = exp.metrics.judge or "local"
    lines += [
        "## Quality",
        "",
        "SD% and 4g% (lower is better), D-2 (higher is better) as the paper's appendix "
        f"defines them; PPL under `{exp.metrics.oracle}`"
        + (
            f"; judge: `{judge}`"
            + (" (a 135M model: a weak judge, read it as a smoke test)" if judge == "local" else "")
            + ". "
            + _judge_method(run)
            if "judge" in exp.metrics.quality
            else " (no judge in this experiment)."
        ),
        "",
        "| scheme | n | SD% | D-2 | 4g% | PPL | W/L/T % (judged) | AvgRank (Δ) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for _, r in qual.iterrows():
        if not r.get("n"):
            continue  # no quality record yet for this row
        wlt = "/".join(_pct(r.get(k, float("nan"))) for k in ("win", "lose", "tie"))
        judged = r.get("judged", float("nan"))
        if math.isfinite(judged):
            wlt += f" ({int(judged)})"
        rank = _num(r.get("avg_rank", float("nan")))
        if math.isfinite(r.get("avg_rank_delta", float("nan"))):
            rank += f" ({r['avg_rank_delta']:+.2f})"
        nan = float("nan")
        cells = [
            str(int(r.get("n", 0) or 0)),
            _num(r.get("sd", nan)),
            _num(r.get("distinct2", nan), 3),
            _num(r.get("rep4", nan)),
            _num(r.get("perplexity", nan), 1),
            wlt,
            rank,
        ]
        lines.append(f"| {r['scheme']} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def _efficiency_section(run: Run, eff: pd.DataFrame) -> list[str]:
    lines: list[str] = []
    lines += [
        "## Efficiency",
        "",
        f"Short: texts with fewer than the {run.experiment.dataset.sentences} sentences "
        "asked (less evidence for the length alone; an empty one counts as a miss).",
        "",
        "| scheme | texts | short | s/sentence | s/token | Tok/Out | tokens/sentence "
        "| detect ms/text |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for _, r in eff.iterrows():
        lines.append(
            f"| {r['scheme']} | {r['texts']} | {r['short_texts']} | "
            f"{_num(r['s_per_sentence'], 1)} | "
            f"{_num(r['s_per_token'], 3)} | {_num(r['tok_per_out'], 1)} | "
            f"{_num(r['tokens_per_sentence'], 0)} | "
            f"{_num(r.get('detect_ms_per_text', float('nan')), 0)} |"
        )
    lines.append("")
    return lines


def _fidelity_section(att: pd.DataFrame) -> list[str]:
    lines: list[str] = []
    lines += [
        "## Attack fidelity",
        "",
        "What each attack kept of the original (all rows pooled), measured under an "
        "embedder other than SAMark's. Sentences: attacked / original sentence count. "
        "Aligned sim.: for each original sentence, the best cosine among the attacked "
        "text's sentences, averaged (median over texts, 10th percentile in brackets); "
        "precision: the same from the attacked side (low = invented content). 4-gram "
        "copy: share of the attacked text's 4-grams found verbatim in the original. "
        f"Meaning-preserving: median aligned similarity >= {MEANING_PRESERVING:.2f}.",
        "",
        "| attack | n | sentences | aligned sim. | precision | 4-gram copy | word overlap "
        "| text sim. | s/text | meaning-preserving |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in att.iterrows():
        keeps = r["meaning_preserving"]
        verdict = "–" if keeps is None or keeps != keeps else ("yes" if keeps else "**no**")
        lines.append(
            f"| {r['attack']} | {r['n']} | {_num(r['sentence_ratio'])} | "
            f"{_num(r['aligned_similarity'], 3)} ({_num(r['aligned_similarity_p10'], 3)}) "
            f"| {_num(r['aligned_precision'], 3)} | {_num(r['ngram4_copy'])} | "
            f"{_num(r['word_overlap'])} | {_num(r['similarity'], 3)} | "
            f"{_num(r['seconds'], 2)} | {verdict} |"
        )
    lines.append("")
    return lines


def _signal_section(sig: pd.DataFrame, head: Callable[[str], str]) -> list[str]:
    lines: list[str] = []
    diag = [c for c in sig.columns if c not in SIGNAL_BASE_COLUMNS]
    lines += [
        "## Signal diagnostics",
        "",
        "Where the evidence goes, averaged over texts: units scored (sentences for SAMark "
        "rows, tokens for token rows), units kept relative to the unattacked text, and "
        "each scheme's own signal: `flag_side_share` = share of (sentence, channel) "
        "cosines on the majority-voted flag side, `mean_signed_cosine` = their mean "
        "signed cosine (SAMark rows); `green_fraction` (KGW); `g_value_mean` (SynthID). "
        "The `human` row is the same detector on the human negatives.",
        "",
        "| scheme | attack | n | units | units kept |" + "".join(f" {d} |" for d in diag),
        "|---" * (5 + len(diag)) + "|",
    ]
    for _, r in sig.iterrows():
        cells = [_num(r.get(c, float("nan")), 3) for c in diag]
        lines.append(
            f"| {r['scheme']} | {head(r['attack'])} | {r['n']} | {_num(r['units'], 1)} | "
            f"{_num(r.get('units_kept', float('nan')))} |" + "".join(f" {c} |" for c in cells)
        )
    lines.append("")
    return lines


def _generation_signal_section(gsig: pd.DataFrame) -> list[str]:
    lines: list[str] = []
    lines += [
        "## Where the margin comes from (generation)",
        "",
        "Per-step research records of the SAMark rows, averaged over steps and channels. "
        "Cosines are signed by the step's flags (positive = on the flag side): the "
        "candidate pool's mean and spread, the chosen sentence, its margin over the pool "
        "in pool standard deviations, and the finished text's topic offset (the mean "
        "embedding of its sentences before the last step). For scale: a human text's "
        "mean embedding has a spread of about 0.021 along a random pivot at 12 sentences "
        "(`benchmarks/topic_offset.py`).",
        "",
        "| scheme | steps | candidates | n-gram pass | semantic pass | matched | fallback "
        "| pool mean | pool sd | chosen | margin (sd) | text offset |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in gsig.iterrows():
        lines.append(
            f"| {r['scheme']} | {r['steps']} | {_num(r['candidates'], 1)} | "
            f"{_num(r['ngram_pass'], 1)} | {_num(r['semantic_pass'], 1)} | "
            f"{_num(r['matched'], 1)} | {_pct(r['fallback_share'])}% | "
            f"{_num(r['pool_mean'], 4)} | {_num(r['pool_sd'], 4)} | {_num(r['chosen'], 4)} "
            f"| {_num(r['margin_sd'])} | {_num(r['text_topic_offset'], 4)} |"
        )
    lines.append("")
    return lines


def _length_section(run: Run, by_length: pd.DataFrame) -> list[str]:
    exp = run.experiment
    tag, decided = fpr_tag(exp.metrics.fprs[0]), decision_tag(exp.metrics.alpha)
    ks = sorted(set(by_length["sentences"]))
    lines = [
        "## Power against length",
        "",
        f"{tag.replace('tp@fp', 'TP@FP')} / share with p < {exp.metrics.alpha:g} (%) on the "
        "first k sentences of each text, against the same detector on the first k sentences "
        f"of each human negative (the full {exp.dataset.sentences} from the detection table). "
        "Under an attack, the first k sentences of the attacked text stand in for attacking "
        "a k-sentence text. Intervals in `length.csv`.",
        "",
    ]
    for attack, per_attack in by_length.groupby("attack", sort=False):
        lines += [
            f"### {attack}",
            "",
            "| scheme | " + " | ".join(f"{k} sent." for k in ks) + " |",
            "|---" * (len(ks) + 1) + "|",
        ]
        for scheme, sub in per_attack.groupby("scheme", sort=False):
            at = {int(r["sentences"]): r for _, r in sub.iterrows()}
            cells = [f"{_pct(at[k][tag])} / {_pct(at[k][decided])}" if k in at else "" for k in ks]
            lines.append(f"| {scheme} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


SIGNAL_BASE_COLUMNS = ("scheme", "attack", "n", "units", "units_kept")


def _compute_line(run: Run) -> str:
    """The model work the records hold (seconds summed per stage, as recorded)."""
    parts = []
    for name, stage, field in (
        ("generation", run.generations, "seconds"),
        ("attacks", run.attacks, "seconds"),
        ("detection", run.detections, "seconds"),
    ):
        total = sum(float(r.get(field) or 0.0) for r in stage.records())  # all work spent
        if total:
            parts.append(f"{name} {total / 3600:.2f} h")
    return ("Recorded compute: " + ", ".join(parts) + ".") if parts else ""
