"""The tables of docs/results/2026-12-05-short-texts from its ``scores.jsonl``.

Per row, attack and statistic, the share found at p < 0.01 (semantic layer alone /
combined); the human FPR with exact binomial 95% intervals (the human windows cut from the
run's own prompt articles left out); and each candidate's paired discordant counts against
the shipped scan (found only by it / only by scan, exact McNemar p). Writes
``summary.jsonl`` beside the scores.

    python -m benchmarks.studies.short_texts_summary [scores.jsonl]

(``heldout-scores.jsonl``: other rows' texts, no human side; its summary is
``heldout-summary.jsonl``.)
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from scipy.stats import binomtest

FOLDER = Path("docs/results/2026-12-05-short-texts")
STATISTICS = ("scan", "full_sum", "mean_all", "scan_channel_mean")
ALPHA = 0.01


def found(row: dict[str, Any], field: str) -> bool:
    value = row.get(field)
    return value is not None and value < ALPHA


def interval(k: int, n: int) -> str:
    ci = binomtest(k, n).proportion_ci(0.95, "exact")
    return f"{100 * k / n:.2f}% [{100 * ci.low:.2f}, {100 * ci.high:.2f}] ({k}/{n})"


def main() -> None:
    scores = Path(sys.argv[1]) if len(sys.argv) > 1 else FOLDER / "scores.jsonl"
    with scores.open() as f:
        rows = [json.loads(line) for line in f]
    prompts = {r["item"] for r in rows if r["row"] != "human"}

    def of_a_prompt(r: dict[str, Any]) -> bool:
        if r["row"] != "human" or not r["item"].startswith("cnn_dailymail:"):
            return False
        return r["item"].split(":", 1)[1].split("#")[0] in prompts

    rows = [r for r in rows if not of_a_prompt(r)]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["row"], r["attack"])].append(r)
        if r["row"] != "human":
            groups[("both rows", r["attack"])].append(r)
    out: list[dict[str, Any]] = []
    print("| row | attack | n | " + " | ".join(STATISTICS) + " |")
    print("|---|---|---|" + "---|" * len(STATISTICS))
    for key in sorted(groups, key=lambda k: (k[0] == "human", k[0] != "both rows", k)):
        rs = groups[key]
        cells = []
        for c in STATISTICS:
            s = sum(found(r, f"p_sem_{c}") for r in rs)
            k = sum(found(r, f"p_{c}") for r in rs)
            cells.append(f"{100 * s / len(rs):.1f} / {100 * k / len(rs):.1f}")
            out.append(
                {"row": key[0], "attack": key[1], "n": len(rs), "statistic": c}
                | {"found_semantic": s, "found_combined": k}
            )
        print(f"| {key[0]} | {key[1]} | {len(rs)} | " + " | ".join(cells) + " |")
    print("\n| statistic | human FPR, semantic alone | human FPR, combined |\n|---|---|---|")
    human = groups.get(("human", "none"), [])
    with_token = [r for r in human if r.get("p_token") is not None]
    for c in STATISTICS if human else ():
        s = sum(found(r, f"p_sem_{c}") for r in human)
        k = sum(found(r, f"p_{c}") for r in with_token)
        print(f"| {c} | {interval(s, len(human))} | {interval(k, len(with_token))} |")
    print(
        "\n| candidate | attack | semantic: only it / only scan | combined: only it / only scan |"
    )
    print("|---|---|---|---|")
    marked = [r for r in rows if r["row"] != "human"]
    for c in STATISTICS[1:]:
        for attack in sorted({r["attack"] for r in marked}):
            line = []
            for kind in ("p_sem_", "p_"):
                rs = [r for r in marked if r["attack"] == attack]
                a = sum(found(r, kind + c) and not found(r, kind + "scan") for r in rs)
                b = sum(found(r, kind + "scan") and not found(r, kind + c) for r in rs)
                p = binomtest(a, a + b).pvalue if a + b else 1.0
                line.append(f"{a} / {b} (p {p:.2f})")
            print(f"| {c} | {attack} | " + " | ".join(line) + " |")
    summary = scores.with_name(scores.name.replace("scores", "summary"))
    with summary.open("w") as f:
        for o in out:
            f.write(json.dumps(o) + "\n")


if __name__ == "__main__":
    main()
