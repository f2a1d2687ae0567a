"""The layered row's share with p < alpha per attack, from a run's detection records: its
combined p-value (Fisher, the default), the Cauchy and "both" combinations recomputed from
each record's two layer p-values, each layer alone, and other rows on the same prompts.

    python benchmarks/studies/layered_cells.py experiments/runs/paper

No re-scoring (the records keep ``p_semantic`` and ``p_token``); every p-value is exact,
so p < alpha needs no human negatives. Other rows wrote their own texts for the same
prompts: the comparison is paired on prompts, not on texts.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from samark.evaluation.runner import Run
from samark.schemes.samark.layered import combine_p_values


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--row", default="SAMark (layered)")
    ap.add_argument("--compare", nargs="*", default=["KGW", "SynthID", "SAMark", "SAMark (scan)"])
    ap.add_argument("--alpha", type=float, default=0.01)
    args = ap.parse_args()
    run = Run.open(args.run)
    records = run.current_records(run.detections)
    mine: dict[str, dict[str, dict]] = defaultdict(dict)  # attack -> item -> record
    others: dict[tuple[str, str, str], float] = {}
    for r in records:
        if r.get("scheme") == args.row:
            mine[r["attack"]][r["item"]] = r
        elif r.get("scheme") in args.compare:
            others[(r["scheme"], r["attack"], r["item"])] = float(r["p_value"])
    attacks = [a for a in ["none", *(a.label for a in run.experiment.attacks)] if a in mine]
    kinds = ["fisher", "cauchy", "both", "semantic", "token"]
    print(f"share with p < {args.alpha} (%), {args.row} and, on the same prompts, other rows")
    print("| attack | n | " + " | ".join(kinds + args.compare) + " |")
    print("|---" * (2 + len(kinds) + len(args.compare)) + "|")
    for attack in attacks:
        rows = list(mine[attack].values())
        cells = []
        for kind in kinds:
            hits = 0
            for r in rows:
                d = r.get("details") or {}
                p_sem, p_tok = d.get("p_semantic"), d.get("p_token")
                if kind == "fisher" or p_sem is None or p_tok is None:
                    p = float(r["p_value"]) if kind == "fisher" else 1.0
                elif kind in ("cauchy", "both"):
                    p = combine_p_values(p_sem, p_tok, method=kind)
                else:
                    p = p_sem if kind == "semantic" else p_tok
                hits += p < args.alpha
            cells.append(f"{100 * hits / len(rows):.1f}")
        for scheme in args.compare:
            ps = [others.get((scheme, attack, item)) for item in mine[attack]]
            found = [p for p in ps if p is not None]
            cells.append(
                f"{100 * sum(p < args.alpha for p in found) / len(found):.1f}" if found else "–"
            )
        print(f"| {attack} | {len(rows)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
