"""Tables (markdown in the paper's layout + CSV) and plots (PNG) for a run folder."""

from __future__ import annotations

import functools
import math
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from samark.evaluation.attacks.base import attack_is_paraphrase
from samark.evaluation.detection_metrics import (
    auc,
    bootstrap_interval,
    evidence,
    rate_below,
    tpr_at_fpr,
)
from samark.evaluation.experiment import NO_ATTACK
from samark.evaluation.fidelity import FIELDS as FIDELITY_FIELDS
from samark.evaluation.fidelity import MEANING_PRESERVING, is_meaning_preserving
from samark.evaluation.runner import Run


def _pct(x: float) -> str:
    return "–" if x is None or not math.isfinite(x) else f"{100 * x:.1f}"


def _num(x: float, digits: int = 2) -> str:
    return "–" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def _tpr(negatives: np.ndarray, positives: np.ndarray, fpr: float) -> float:
    return tpr_at_fpr(negatives, positives, fpr)


def detection_table(run: Run) -> pd.DataFrame:
    """One row per (scheme, attack): TP@FP, AUC with bootstrap CIs, calibrated rates."""
    exp = run.experiment
    det = pd.DataFrame(run.current_records(run.detections))
    rows: list[dict[str, Any]] = []
    if det.empty:
        return pd.DataFrame(rows)
    alpha = exp.metrics.alpha
    for spec in exp.schemes:
        mine = det[det["scheme"] == spec.label]
        if mine.empty:
            continue
        humans = human_records(run, det, mine["detector"].iloc[0])
        neg = evidence(humans["p_value"], humans["z"])
        for attack in [NO_ATTACK, *[a.label for a in exp.attacks]]:
            sub = mine[mine["attack"] == attack]
            if sub.empty:
                continue
            pos = evidence(sub["p_value"], sub["z"])
            row: dict[str, Any] = {
                "scheme": spec.label,
                "attack": attack,
                "n_positive": len(pos),
                "n_negative": len(neg),
                "auc": auc(neg, pos),
                decision_tag(alpha): rate_below(sub["p_value"], alpha),
                human_fpr_tag(alpha): rate_below(humans["p_value"], alpha),
            }
            lo, hi = bootstrap_interval(neg, pos, auc, samples=exp.metrics.bootstrap)
            row["auc_lo"], row["auc_hi"] = lo, hi
            for fpr in exp.metrics.fprs:
                row.update(_tp_columns(neg, pos, fpr, exp.metrics.bootstrap))
            rows.append(row)
    return pd.DataFrame(rows)


def length_table(run: Run) -> pd.DataFrame:
    """Power against length (``[metrics] lengths``): per (scheme, attack, k sentences),
    TP at the first FPR with its bootstrap interval (thresholds from the human negatives'
    first k sentences, scored by the same detector) and the calibrated rates. The full
    length comes from the detect stage."""
    exp = run.experiment
    rows: list[dict[str, Any]] = []
    lengths = pd.DataFrame(run.current_records(run.lengths))
    if not exp.metrics.lengths or lengths.empty:
        return pd.DataFrame(rows)
    full = pd.DataFrame(run.current_records(run.detections))
    fpr, alpha = exp.metrics.fprs[0], exp.metrics.alpha
    for spec in exp.schemes:
        for k in [*sorted(exp.metrics.lengths), exp.dataset.sentences]:
            records = full if k == exp.dataset.sentences else lengths[lengths["sentences"] == k]
            if records.empty:
                continue
            mine = records[records["scheme"] == spec.label]
            if mine.empty:
                continue
            humans = human_records(run, records, mine["detector"].iloc[0])
            if humans.empty:
                continue
            neg = evidence(humans["p_value"], humans["z"])
            for attack in [NO_ATTACK, *exp.metrics.length_attacks]:
                sub = mine[mine["attack"] == attack]
                if sub.empty:
                    continue
                pos = evidence(sub["p_value"], sub["z"])
                rows.append(
                    {
                        "scheme": spec.label,
                        "attack": attack,
                        "sentences": k,
                        "n_positive": len(pos),
                        "n_negative": len(neg),
                        **_tp_columns(neg, pos, fpr, exp.metrics.bootstrap),
                        decision_tag(alpha): rate_below(sub["p_value"], alpha),
                        human_fpr_tag(alpha): rate_below(humans["p_value"], alpha),
                    }
                )
    return pd.DataFrame(rows)


def _tp_columns(
    negatives: np.ndarray, positives: np.ndarray, fpr: float, samples: int
) -> dict[str, float]:
    """TP at the empirical ``fpr`` with its bootstrap interval, under their column names."""
    tag = fpr_tag(fpr)
    lo, hi = bootstrap_interval(
        negatives, positives, functools.partial(_tpr, fpr=fpr), samples=samples
    )
    return {tag: tpr_at_fpr(negatives, positives, fpr), f"{tag}_lo": lo, f"{tag}_hi": hi}


def fpr_tag(fpr: float) -> str:
    """The column of TPR at an empirical FPR: ``tp@fp1%`` for 0.01."""
    return f"tp@fp{100 * fpr:g}%"


def decision_tag(alpha: float) -> str:
    """The column of the share flagged by the calibrated rule: ``tpr_at_p_0.01``."""
    return f"tpr_at_p_{alpha:g}"


def human_fpr_tag(alpha: float) -> str:
    """The column of the human FPR of the calibrated rule: ``human_fpr_at_p_0.01``."""
    return f"human_fpr_at_p_{alpha:g}"


def human_records(run: Run, records: pd.DataFrame, detector: str) -> pd.DataFrame:
    """The detector's scores on the experiment's current human negatives (records of
    negatives that an earlier version of the experiment used are left out)."""
    ids = {d.id for d in run.negatives()}
    return records[
        (records["scheme"] == "human")
        & (records["detector"] == detector)
        & records["item"].isin(ids)
    ]


def corpus_fpr_table(run: Run) -> pd.DataFrame:
    """Human FPR at the calibrated rule per source corpus of the negatives (the prompts'
    own continuations, then each ``negatives_from`` data set), per detector row: a pooled
    FPR can hide a corpus on which a key's p-values sit low."""
    exp = run.experiment
    det = pd.DataFrame(run.current_records(run.detections))
    rows: list[dict[str, Any]] = []
    if det.empty:
        return pd.DataFrame(rows)
    for spec in exp.schemes:
        mine = det[det["scheme"] == spec.label]
        if mine.empty:
            continue
        humans = human_records(run, det, mine["detector"].iloc[0])
        corpus = humans["item"].map(negative_corpus)
        for name, sub in humans.groupby(corpus, sort=False):
            rows.append(
                {
                    "scheme": spec.label,
                    "corpus": name,
                    "n": len(sub),
                    "fpr": rate_below(sub["p_value"], exp.metrics.alpha),
                }
            )
    return pd.DataFrame(rows)


def negative_corpus(item: str) -> str:
    """The source of a human negative from its id: ``<example>:continuation`` or
    ``<data set>:<window>``."""
    head, _, tail = item.partition(":")
    return "continuations" if tail == "continuation" else head


def quality_table(run: Run) -> pd.DataFrame:
    exp = run.experiment
    recs = run.current_records(run.quality)
    per_text = pd.DataFrame([r for r in recs if r["key"][0] == "quality"])
    judged = [r for r in recs if r["key"][0] == "judge"]
    # one blind ranking per item: the one over the most rows (a partial run ranks fewer)
    best: dict[str, dict[str, Any]] = {}
    for r in recs:
        seen = len(best.get(r.get("item", ""), {}).get("ranks", {}))
        if r["key"][0] == "rank" and r.get("ranks") and len(r["ranks"]) > seen:
            best[r["item"]] = r
    ranked = list(best.values())
    rows = []
    for spec in exp.schemes:
        row: dict[str, Any] = {"scheme": spec.label}
        if not per_text.empty:
            sub = per_text[per_text["scheme"] == spec.label]
            row["n"] = len(sub)
            for m in ("sd", "distinct2", "rep4", "perplexity"):
                if m in sub:
                    row[m] = float(sub[m].mean())
        outcomes = [r["pairwise"] for r in judged if r["scheme"] == spec.label]
        valid = [o for o in outcomes if o]
        if outcomes:
            for o in ("win", "lose", "tie"):
                row[o] = valid.count(o) / len(valid) if valid else float("nan")
            row["judged"] = len(valid)
            row["judge_invalid"] = len(outcomes) - len(valid)
        ranks = [r["ranks"][spec.label] for r in ranked if spec.label in r["ranks"]]
        if ranks:
            row["avg_rank"] = float(np.mean(ranks))
        rows.append(row)
    df = pd.DataFrame(rows)
    reference = exp.reference_row()
    ref = reference.label if reference is not None else None
    if ref is not None and "avg_rank" in df:
        base = df.loc[df["scheme"] == ref, "avg_rank"]
        if len(base) and math.isfinite(base.iloc[0]):
            df["avg_rank_delta"] = df["avg_rank"] - base.iloc[0]
    return df


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


def efficiency_table(run: Run) -> pd.DataFrame:
    exp = run.experiment
    gens = pd.DataFrame(run.current_records(run.generations))
    det = pd.DataFrame(run.current_records(run.detections))
    rows = []
    for spec in exp.schemes:
        if gens.empty:
            break
        sub = gens[gens["scheme"] == spec.label]
        if sub.empty:
            continue
        sentences = sub["sentences"].map(len).sum()
        out_tokens = sub["output_tokens"].sum()
        row = {
            "scheme": spec.label,
            "texts": len(sub),
            # texts with fewer sentences than asked: less evidence for the length alone
            "short_texts": int((sub["sentences"].map(len) < exp.dataset.sentences).sum()),
            "s_per_sentence": sub["seconds"].sum() / max(sentences, 1),
            "s_per_token": sub["seconds"].sum() / max(out_tokens, 1),
            "tok_per_out": sub["tokens_sampled"].sum() / max(out_tokens, 1),
            "tokens_per_sentence": sub["tokens_sampled"].sum() / max(sentences, 1),
        }
        if not det.empty:
            d = det[det["scheme"] == spec.label]
            if len(d):
                row["detect_ms_per_text"] = 1000 * d["seconds"].mean()
        rows.append(row)
    return pd.DataFrame(rows)


def attack_table(run: Run) -> pd.DataFrame:
    """Fidelity per attack (all scheme rows pooled): what the attack kept of the original,
    and whether it counts as meaning-preserving (:mod:`samark.evaluation.fidelity`)."""
    att = pd.DataFrame(run.current_records(run.attacks))
    if not att.empty and "source_empty" in att:
        att = att[att["source_empty"] != True]  # noqa: E712  (nothing was attacked)
    if att.empty:
        return att
    if "overlap" in att and "word_overlap" not in att:
        att["word_overlap"] = att["overlap"]  # records written before the fidelity fields
    for f in FIDELITY_FIELDS:
        if f not in att:
            att[f] = np.nan
    rows = []
    for label, sub in att.groupby("attack", sort=False):
        aligned = sub["aligned_similarity"].dropna()
        rows.append(
            {
                "attack": label,
                "n": len(sub),
                "sentence_ratio": sub["sentence_ratio"].mean(),
                "aligned_similarity": aligned.median() if len(aligned) else np.nan,
                "aligned_similarity_p10": aligned.quantile(0.1) if len(aligned) else np.nan,
                "aligned_precision": sub["aligned_precision"].median(),
                "ngram4_copy": sub["ngram4_copy"].mean(),
                "word_overlap": sub["word_overlap"].mean(),
                "similarity": sub["similarity"].mean(),
                "seconds": sub["seconds"].mean(),
                "meaning_preserving": (
                    is_meaning_preserving(aligned.to_numpy()) if len(aligned) else None
                ),
            }
        )
    return pd.DataFrame(rows)


def signal_table(run: Run) -> pd.DataFrame:
    """Where the signal goes, per scheme and attack: units scored, units kept relative to
    the unattacked text, and the scheme's own diagnostics (SAMark: share of sentence-channel
    cosines on the majority-voted flag side and mean signed cosine; KGW: green fraction;
    SynthID: mean g-value), averaged over texts. Human texts are the reference row."""
    det = pd.DataFrame(run.current_records(run.detections))
    if det.empty:
        return det
    if "details" not in det:
        det["details"] = None
    det["details"] = det["details"].map(lambda d: d if isinstance(d, dict) else {})
    rows = []
    for spec in run.experiment.schemes:
        mine = det[det["scheme"] == spec.label]
        if mine.empty:
            continue
        humans = human_records(run, det, mine["detector"].iloc[0])
        base = mine[mine["attack"] == NO_ATTACK].set_index("item")["n_units"]
        groups = [("human", humans)] + [
            (a, mine[mine["attack"] == a])
            for a in [NO_ATTACK, *[x.label for x in run.experiment.attacks]]
        ]
        for attack, sub in groups:
            if sub.empty:
                continue
            row: dict[str, Any] = {
                "scheme": spec.label,
                "attack": attack,
                "n": len(sub),
                "units": sub["n_units"].mean(),
            }
            if attack != "human":
                kept = sub.set_index("item")["n_units"] / base.reindex(sub["item"]).to_numpy()
                row["units_kept"] = float(kept.replace([np.inf], np.nan).mean())
            details = pd.DataFrame(list(sub["details"]))
            for name in details.columns:
                row[name] = float(details[name].mean())
            rows.append(row)
    return pd.DataFrame(rows)


def generation_signal_table(run: Run) -> pd.DataFrame:
    """Where SAMark rows' margin comes from, from their per-step research records: pool
    size and filter survivors, matched candidates, and per channel (averaged over channels,
    flag-signed cosines) the pool's mean and spread, the chosen sentence, its margin over
    the pool in pool standard deviations, and the topic offset of the finished text (the
    mean embedding of its sentences, as recorded before its last step)."""
    rows = []
    for spec in run.experiment.schemes:
        if not spec.writes:
            continue  # its owner row's generations
        gens = run.row_generations(spec)
        steps = [st for g in gens for st in g.get("steps") or [] if "signal_chosen" in st]
        if not steps:
            continue
        chosen = np.array([st["signal_chosen"] for st in steps])
        pool_mean = np.array([st["signal_pool_mean"] for st in steps])
        pool_sd = np.array([st["signal_pool_sd"] for st in steps])
        finals = [
            g["steps"][-1]["signal_topic"]
            for g in gens
            if g.get("steps") and "signal_topic" in g["steps"][-1]
        ]
        rows.append(
            {
                "scheme": spec.label,
                "steps": len(steps),
                "candidates": float(np.mean([st["candidates"] for st in steps])),
                "ngram_pass": float(np.mean([st["ngram_pass"] for st in steps])),
                "semantic_pass": float(np.mean([st["semantic_pass"] for st in steps])),
                "matched": float(np.mean([st["matched"] for st in steps])),
                "fallback_share": float(np.mean([st["kind"] != "matched" for st in steps])),
                "pool_mean": float(pool_mean.mean()),
                "pool_sd": float(pool_sd.mean()),
                "chosen": float(chosen.mean()),
                "margin_sd": float(((chosen - pool_mean) / np.maximum(pool_sd, 1e-9)).mean()),
                "text_topic_offset": float(np.mean(finals)) if finals else np.nan,
            }
        )
    return pd.DataFrame(rows)


def _unfaithful(att: pd.DataFrame) -> set[str]:
    if att.empty or "meaning_preserving" not in att:
        return set()
    return set(att.loc[att["meaning_preserving"] == False, "attack"])  # noqa: E712


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


def _markdown(
    run: Run,
    det: pd.DataFrame,
    qual: pd.DataFrame,
    eff: pd.DataFrame,
    att: pd.DataFrame,
    sig: pd.DataFrame,
    gsig: pd.DataFrame,
    corpora: pd.DataFrame,
    by_length: pd.DataFrame,
) -> str:
    exp = run.experiment
    lines = [f"# Experiment `{exp.name}`", ""]
    lines += [
        f"Machine: {platform.platform()}, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}.",
        f"Data: `{exp.dataset.name}`, {exp.dataset.sentences} sentences per text; "
        f"generator `{exp.generator}`; SAMark embedder `{exp.embedder}`.",
        _compute_line(run),
        "",
    ]
    unfaithful = _unfaithful(att)

    def head(attack: str) -> str:
        return f"{attack} *" if attack in unfaithful else attack

    if not det.empty:
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
        attacks = [
            a for a in [NO_ATTACK, *[a.label for a in exp.attacks]] if a in set(det["attack"])
        ]
        lines += _scheme_table(
            det,
            attacks,
            head,
            lambda r: (
                "/".join(_pct(r[f]) for f in fprs) + f"/{_pct(r['auc'])} (n={r['n_positive']})"
            ),
        )
        first = fprs[0]
        decided = decision_tag(exp.metrics.alpha)
        lines += [
            "",
            f"{first.replace('tp@fp', 'TP@FP')} with its 95% bootstrap interval:",
            "",
        ]
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
            lead=(
                "human FPR",
                lambda sub: _pct(sub.iloc[0][human_fpr_tag(exp.metrics.alpha)]),
            ),
        )
        lines.append("")
    if not corpora.empty:
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
    if not by_length.empty:
        lines += _length_section(run, by_length)
    if not qual.empty:
        judge = exp.metrics.judge or "local"
        lines += [
            "## Quality",
            "",
            "SD% and 4g% (lower is better), D-2 (higher is better) as the paper's appendix "
            f"defines them; PPL under `{exp.metrics.oracle}`"
            + (
                f"; judge: `{judge}`"
                + (
                    " (a 135M model: a weak judge, read it as a smoke test)"
                    if judge == "local"
                    else ""
                )
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
    if not eff.empty:
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
    if not att.empty:
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
    if not sig.empty:
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
    if not gsig.empty:
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
    plots = ["roc.png", "scores.png", "tradeoff.png", *(["length.png"] if len(by_length) else [])]
    lines += ["Plots: " + ", ".join(f"`{p}`" for p in plots) + ".", ""]
    return "\n".join(lines)


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


def _attack_styles(attacks: list[str]) -> dict[str, dict[str, Any]]:
    """A distinct (colour, line style) per attack, however many there are."""
    import matplotlib

    tab10 = matplotlib.colormaps["tab10"]
    colours = [tab10(i) for i in range(10)]
    dashes = ["-", "--", "-.", ":"]
    return {
        a: {"color": colours[i % len(colours)], "linestyle": dashes[(i // len(colours)) % 4]}
        for i, a in enumerate(attacks)
    }


def _symlog_values(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.log10(1 + np.abs(x))


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


def _plots(
    run: Run, det: pd.DataFrame, qual: pd.DataFrame, att: pd.DataFrame, folder: Path
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    exp = run.experiment
    records = pd.DataFrame(run.current_records(run.detections))
    if records.empty:
        return
    schemes = [s for s in exp.schemes if (records["scheme"] == s.label).any()]
    if not schemes:
        return
    attacks = [NO_ATTACK, *[a.label for a in exp.attacks]]
    humans_of = {
        spec.label: human_records(
            run, records, records.loc[records["scheme"] == spec.label, "detector"].iloc[0]
        )
        for spec in schemes
    }
    # ROC per scheme: one colour and line style per attack, one legend for all panels
    styles = _attack_styles(attacks)
    fig, axes = plt.subplots(
        1, len(schemes), figsize=(3.6 * len(schemes) + 2.4, 3.8), squeeze=False
    )
    for ax, spec in zip(axes[0], schemes, strict=True):
        mine = records[records["scheme"] == spec.label]
        humans = humans_of[spec.label]
        neg = evidence(humans["p_value"], humans["z"])
        for a in attacks:
            sub = mine[mine["attack"] == a]
            if sub.empty or not len(neg):
                continue
            pos = evidence(sub["p_value"], sub["z"])
            thr = np.unique(np.concatenate([neg, pos, [np.inf]]))[::-1]
            fpr = [(neg >= t).mean() for t in thr]
            tpr = [(pos >= t).mean() for t in thr]
            ax.plot(fpr, tpr, label=a, lw=1.2, **styles[a])
        ax.plot([0, 1], [0, 1], "k:", lw=0.5)
        ax.axvline(exp.metrics.fprs[0], color="0.6", lw=0.6)
        ax.set_xscale("symlog", linthresh=0.01)
        ax.set_xlim(0, 1)
        ax.set_title(spec.label)
        ax.set_xlabel("FPR on human text (symlog)")
        ax.set_ylabel("TPR")
    handles = {
        h.get_label(): h for ax in axes[0] for h in ax.get_lines() if h.get_label() in styles
    }
    fig.legend(
        [handles[a] for a in attacks if a in handles],
        [a for a in attacks if a in handles],
        loc="center right",
        fontsize=7,
        frameon=False,
    )
    fig.tight_layout(rect=(0, 0, 1 - 2.2 / (3.6 * len(schemes) + 2.4), 1))
    fig.savefig(folder / "roc.png", dpi=120)
    plt.close(fig)
    # what the decision uses: -log10 p (top, the p < alpha rule as a line) and the
    # statistic whose rank gives p (bottom, symlog: SAMark's z spans 0 to hundreds)
    fig, axes = plt.subplots(2, len(schemes), figsize=(4 * len(schemes), 6), squeeze=False)
    for col, spec in enumerate(schemes):
        mine = records[records["scheme"] == spec.label]
        groups = {
            "human": humans_of[spec.label],
            "watermarked": mine[mine["attack"] == NO_ATTACK],
            "attacked": mine[mine["attack"] != NO_ATTACK],
        }
        top, bottom = axes[0][col], axes[1][col]
        logp = {
            n: -np.log10(np.clip(g["p_value"].astype(float), 1e-300, 1)) for n, g in groups.items()
        }
        hi = max([float(v.max()) for v in logp.values() if len(v)] + [3.0])
        bins = np.linspace(0, hi * 1.02, 31)
        for name, g in groups.items():
            if len(g):
                top.hist(logp[name], bins=bins, alpha=0.5, label=f"{name} ({len(g)})")
                score = np.nan_to_num(np.asarray(g["score"], dtype=float), posinf=1e6)
                bottom.hist(_symlog_values(score), bins=30, alpha=0.5, label=name)
        top.axvline(-math.log10(exp.metrics.alpha), color="k", lw=0.8, ls="--")
        top.set_yscale("log")
        top.set_title(spec.label)
        top.set_xlabel(f"-log10 p  (dashed: p = {exp.metrics.alpha:g})")
        bottom.set_xlabel(f"statistic `{mine['statistic'].iloc[0]}`, sign(x)·log10(1+|x|)")
        top.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(folder / "scores.png", dpi=120)
    plt.close(fig)
    # robustness-quality trade-off
    if not det.empty and not qual.empty and "distinct2" in qual:
        # the last meaning-preserving paragraph paraphrase (an unfaithful rewrite says
        # nothing about robustness to paraphrase)
        unfaithful = _unfaithful(att)
        hardest = next(
            (
                a.label
                for a in reversed(exp.attacks)
                if attack_is_paraphrase(a.name) and a.label not in unfaithful
            ),
            NO_ATTACK,
        )
        fig, ax = plt.subplots(figsize=(5, 4))
        for _, q in qual.iterrows():
            d = det[(det["scheme"] == q["scheme"]) & (det["attack"] == hardest)]
            if len(d) and math.isfinite(q["distinct2"]):
                x, y = q["distinct2"], 100 * d.iloc[0][fpr_tag(exp.metrics.fprs[0])]
                ax.scatter([x], [y])
                ax.annotate(q["scheme"], (x, y), fontsize=7)
        ax.set_xlabel("Distinct-2 (quality)")
        ax.set_ylabel(f"{fpr_tag(exp.metrics.fprs[0]).replace('tp@fp', 'TP@FP')} under {hardest}")
        fig.tight_layout()
        fig.savefig(folder / "tradeoff.png", dpi=120)
        plt.close(fig)


def _length_plot(run: Run, by_length: pd.DataFrame, folder: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tag = fpr_tag(run.experiment.metrics.fprs[0])
    attacks = list(dict.fromkeys(by_length["attack"]))
    fig, axes = plt.subplots(1, len(attacks), figsize=(5 * len(attacks), 4), squeeze=False)
    for ax, attack in zip(axes[0], attacks, strict=True):
        for scheme, sub in by_length[by_length["attack"] == attack].groupby("scheme", sort=False):
            sub = sub.sort_values("sentences")
            ax.plot(sub["sentences"], 100 * sub[tag], marker="o", lw=1.2, label=scheme)
        ax.set_title(attack)
        ax.set_xlabel("sentences")
        ax.set_ylabel(tag.replace("tp@fp", "TP@FP") + " (%)")
        ax.set_ylim(0, 101)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(folder / "length.png", dpi=120)
    plt.close(fig)


def write_report(run_dir: str | Path, out_dir: str | Path | None = None) -> Path:
    """Write the tables and plots into ``out_dir`` (default: ``report/`` inside the run
    folder); returns the markdown file."""
    run_dir = Path(run_dir)
    run = Run.open(run_dir)
    folder = Path(out_dir) if out_dir is not None else run_dir / "report"
    folder.mkdir(parents=True, exist_ok=True)
    det, qual = detection_table(run), quality_table(run)
    eff, att, sig = efficiency_table(run), attack_table(run), signal_table(run)
    gsig = generation_signal_table(run)
    corpora = corpus_fpr_table(run)
    by_length = length_table(run)
    for name, df in (
        ("generation_signal", gsig),
        ("detection", det),
        ("quality", qual),
        ("efficiency", eff),
        ("attacks", att),
        ("signal", sig),
        ("corpus_fpr", corpora),
        ("length", by_length),
    ):
        df.to_csv(folder / f"{name}.csv", index=False)
    md = folder / "report.md"
    md.write_text(
        _markdown(run, det, qual, eff, att, sig, gsig, corpora, by_length), encoding="utf-8"
    )
    _plots(run, det, qual, att, folder)
    if not by_length.empty:
        _length_plot(run, by_length, folder)
    return md


__all__ = [
    "attack_table",
    "corpus_fpr_table",
    "detection_table",
    "efficiency_table",
    "generation_signal_table",
    "length_table",
    "quality_table",
    "signal_table",
    "write_report",
]
