"""The report's tables: one pandas DataFrame per view of a run's records (detection, power
against length, quality, efficiency, attack fidelity, signal), also written as CSV."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import pandas as pd

from samark.evaluation.detection_metrics import (
    auc,
    bootstrap_interval,
    evidence,
    rate_below,
    tpr_at_fpr,
)
from samark.evaluation.experiment import NO_ATTACK
from samark.evaluation.fidelity import FIELDS as FIDELITY_FIELDS
from samark.evaluation.fidelity import is_meaning_preserving
from samark.evaluation.runner import Run


def _tpr(negatives: np.ndarray, positives: np.ndarray, fpr: float) -> float:
    return tpr_at_fpr(negatives, positives, fpr)


def detection_table(run: Run) -> pd.DataFrame:
    """One row per (scheme, attack): TP@FP, AUC with bootstrap CIs, calibrated rates."""
    exp = run.experiment
    det = pd.DataFrame(run.current_records(run.detections))
    rows: list[dict[str, object]] = []
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
            row: dict[str, object] = {
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
    rows: list[dict[str, object]] = []
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
    rows: list[dict[str, object]] = []
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
        row: dict[str, object] = {"scheme": spec.label}
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
            row: dict[str, object] = {
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


def unfaithful_attacks(att: pd.DataFrame) -> set[str]:
    if att.empty or "meaning_preserving" not in att:
        return set()
    return set(att.loc[att["meaning_preserving"] == False, "attack"])  # noqa: E712
