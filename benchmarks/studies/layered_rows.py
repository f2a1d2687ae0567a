"""The layered row's texts scored layer by layer, paired with other rows on the same items.

For every text of ``--row`` (a samark-layered row of a run) and each attack it has been
attacked with, prints the share with p < alpha of the combined p-value, of the semantic
layer alone and of the token layer alone; and, on the same items, the share with
p < alpha of the ``--compare`` rows (from the run's own detection records). No human
negatives are needed: p < alpha is the rule users run, and every p-value here is exact.

    python benchmarks/studies/layered_rows.py experiments/runs/paper --row "SAMark (layered)" \
        --compare KGW SynthID SAMark "SAMark (scan)"
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from samark.evaluation.runner import Run
from samark.schemes import create_scheme
from samark.schemes.samark.layered import SAMarkLayered, combine_p_values

NO_ATTACK = "none"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--row", default="SAMark (layered)")
    ap.add_argument("--compare", nargs="*", default=["KGW", "SynthID", "SAMark", "SAMark (scan)"])
    ap.add_argument("--alpha", type=float, default=0.01)
    args = ap.parse_args()

    run = Run.open(args.run)
    spec = next(s for s in run.experiment.schemes if s.label == args.row)
    scheme = create_scheme(spec.name, key=run.key, embedder=run.embedder, **spec.params)
    assert isinstance(scheme, SAMarkLayered)
    gens = [g for g in run.generations.records() if g["scheme"] == args.row]
    texts: dict[str, dict[str, str]] = defaultdict(dict)  # attack -> item -> text
    for g in gens:
        texts[NO_ATTACK][g["item"]] = g["text"]
        for a in run.experiment.attacks:
            rec = run.attacks.get(run.keys.attack(spec, g["item"], a))
            if rec is not None:
                texts[a.label][g["item"]] = rec["text"]
    others: dict[tuple[str, str, str], float] = {}
    for d in run.detections.records():
        if d["scheme"] in args.compare:
            others[(d["scheme"], d["attack"], d["item"])] = d["p_value"]
    a = args.alpha
    cols = ["layered", "layered (cauchy)", "semantic", "token", *args.compare]
    print(f"share with p < {a} (%), {args.row} on {len(gens)} texts; others on the same items")
    print("| attack | n | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for attack, by_item in texts.items():
        items = sorted(by_item)
        found = scheme.detect_many([by_item[i] for i in items])
        res = [d for d in found if d is not None]
        cauchy = [
            combine_p_values(d.details["p_semantic"], d.details["p_token"], method="cauchy")
            for d in res
        ]
        cells = [
            100 * sum(d.p_value < a for d in res) / len(items),
            100 * sum(p < a for p in cauchy) / len(items),
            100 * sum(d.details["p_semantic"] < a for d in res) / len(items),
            100 * sum(d.details["p_token"] < a for d in res) / len(items),
        ]
        for row in args.compare:
            ps = [others.get((row, attack, i)) for i in items]
            known = [p for p in ps if p is not None]
            cells.append(100 * sum(p < a for p in known) / len(known) if known else float("nan"))
        print(f"| {attack} | {len(items)} | " + " | ".join(f"{c:.0f}" for c in cells) + " |")


if __name__ == "__main__":
    main()
