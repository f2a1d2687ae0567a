"""Choosing the softmax temperature epsilon from recorded candidate pools.

For every generation step recorded by ``benchmarks/power.py`` (each matched candidate's
S_wm, D and N), prints, per epsilon, the expected S_wm of the pick (watermark margin:
channel saturation, which is what survives paraphrase), its share of the best possible
gain over a uniform pick, the expected D and N (diversity), and the effective number of
candidates the pick is spread over (exp of the entropy; 1 = deterministic argmax).

    python benchmarks/studies/epsilon.py runs/power/generations.jsonl
"""

from __future__ import annotations

import argparse
import json

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records")
    ap.add_argument("--lambda-div", type=float, default=0.35)
    ap.add_argument("--lambda-nov", type=float, default=0.2)
    args = ap.parse_args()
    pools = []
    with open(args.records) as f:
        for line in f:
            for step in json.loads(line)["steps"]:
                terms = np.array(step.get("matched_terms") or [], dtype=float)
                if len(terms) >= 2:
                    pools.append(terms)
    print(
        f"{len(pools)} steps with >= 2 matched candidates "
        f"(median pool {np.median([len(p) for p in pools]):.0f})"
    )
    print(f"{'eps':>6} {'E[S_wm]':>8} {'gain':>6} {'E[D]':>6} {'E[N]':>6} {'eff. n':>7}")
    for eps in (0.0, 1.0, 3.0, 5.0, 10.0, 20.0, 50.0, np.inf):
        rows = []
        for t in pools:
            s = t[:, 0] + args.lambda_div * t[:, 1] + args.lambda_nov * t[:, 2]
            q = (s == s.max()).astype(float) if np.isinf(eps) else np.exp(eps * (s - s.max()))
            q /= q.sum()
            best, uniform = t[np.argmax(s), 0], t[:, 0].mean()
            e_swm = q @ t[:, 0]
            gain = (e_swm - uniform) / (best - uniform) if best > uniform else 1.0
            ent = -np.sum(q[q > 0] * np.log(q[q > 0]))
            rows.append((e_swm, gain, q @ t[:, 1], q @ t[:, 2], np.exp(ent)))
        m = np.mean(rows, axis=0)
        print(f"{eps:>6} {m[0]:8.3f} {m[1]:6.2f} {m[2]:6.3f} {m[3]:6.3f} {m[4]:7.2f}")


if __name__ == "__main__":
    main()
