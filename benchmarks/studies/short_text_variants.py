"""Short texts (issue 65 item 2): does another semantic statistic or layer combination find
more 3-sentence texts at p < 0.01 under Doc-P and Doc-T, at the same human false-positive
rate? A replay on the default run's stored texts: no text is generated or attacked here.

Texts: the default run's rows ``samark-layered (default)`` (N = 32) and ``N = 64`` (same key
and detector; detection does not depend on N), as written and as Doc-P and Doc-T left them,
cut to their first ``--sentences`` sentences as the length stage cuts them; and the run's
human negatives cut the same way (1,000 windows of three corpora). Each variant is the
shipped detector (the run's key and parameters) with one detection setting changed; every
sentence is embedded once for all variants (``Embedder.remembering``).

    python -m benchmarks.studies.short_text_variants experiments/runs/default \\
        -o docs/results/2026-12-05-short-texts/short_text_variants.jsonl
    python -m benchmarks.studies.short_text_variants \\
        --table docs/results/2026-12-05-short-texts/short_text_variants.jsonl.gz
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.studies.unigram_fpr_markllm import wilson

ROWS = ("samark-layered (default)", "N = 64")
ATTACKS = ("Doc-P (local)", "Doc-T (pt, sentence-wise)")
#: one detection setting changed from the shipped detector, by name
VARIANTS: dict[str, dict[str, object]] = {
    "shipped (scan, fisher)": {},
    "paper z, fisher": {"statistic": "z"},
    "mean alignment, fisher": {"statistic": "alignment"},
    "scan, cauchy": {"combine": "cauchy"},
}
ALPHA = 0.01


def run(run_dir: Path, sentences: int, out: Path) -> None:
    import torch

    from samark.errors import EmptyTextError
    from samark.evaluation.runner import Run
    from samark.evaluation.stages.length import prefix
    from samark.schemes import create_scheme
    from samark.schemes.base import SharedResources

    torch.set_num_threads(1)
    stored = Run.open(run_dir)
    specs = {s.label: s for s in stored.experiment.schemes}
    attacks = [a for a in stored.experiment.attacks if a.label in ATTACKS]
    texts: list[tuple[str, str, str, str]] = []  # (row, item, attack, text)
    for row in ROWS:
        for item, attack, text in stored.row_texts(specs[row], attacks):
            texts.append((row, item, attack, prefix(text, sentences)))
    for doc in stored.row_negatives(specs[ROWS[0]]):
        texts.append(("human", doc.id, "none", prefix(doc.text, sentences)))
    print(f"{len(texts)} texts of {sentences} sentences", flush=True)
    spec = specs[ROWS[0]]
    shared = SharedResources(stored.experiment.generator, stored.embedder)
    out.parent.mkdir(parents=True, exist_ok=True)
    with stored.embedder.remembering(), out.open("w") as f:
        for name, change in VARIANTS.items():
            scheme = create_scheme(
                spec.name,
                key=stored.key_for(spec),
                shared=shared,
                preset=spec.preset,
                **{**spec.params, **change},
            )
            for i, (row, item, attack, text) in enumerate(texts):
                try:
                    d = scheme.detect(text)
                    p, det = float(d.p_value), d.details or {}
                except EmptyTextError:
                    p, det = 1.0, {}
                rec = {
                    "variant": name,
                    "row": row,
                    "item": item,
                    "attack": attack,
                    "sentences": sentences,
                    "p_value": p,
                    "p_semantic": det.get("p_semantic"),
                    "p_token": det.get("p_token"),
                }
                f.write(json.dumps(rec) + "\n")
                if i % 200 == 0:
                    print(f"{name}: {i}/{len(texts)}", flush=True)
            f.flush()


def table(path: Path) -> str:
    import gzip

    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    recs = [json.loads(line) for line in raw.decode().splitlines()]
    variants = list(dict.fromkeys(r["variant"] for r in recs))
    cols = [(row, attack) for row in ROWS for attack in ("none", *ATTACKS)]
    head = ["detector", *[f"{r} {a}" for r, a in cols], "human FPR (95% CI)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for v in variants:
        mine = [r for r in recs if r["variant"] == v]
        cells = []
        for row, attack in cols:
            ps = [r["p_value"] for r in mine if r["row"] == row and r["attack"] == attack]
            cells.append(f"{sum(p < ALPHA for p in ps)} / {len(ps)}")
        hp = [r["p_value"] for r in mine if r["row"] == "human"]
        k = sum(p < ALPHA for p in hp)
        lo, hi = wilson(k, len(hp))
        cells.append(f"{k} / {len(hp)} ({lo:.3f}-{hi:.3f})")
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, nargs="?", default=Path("experiments/runs/default"))
    parser.add_argument("--sentences", type=int, default=3)
    parser.add_argument("-o", "--out", type=Path)
    parser.add_argument("--table", type=Path)
    args = parser.parse_args()
    if args.table:
        print(table(args.table))
        return
    assert args.out is not None, "-o OUT.jsonl"
    run(args.run, args.sentences, args.out)
    print(table(args.out))


if __name__ == "__main__":
    main()
