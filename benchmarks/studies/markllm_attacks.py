"""MarkLLM 0.1.5's offline attacks (``markllm-word-delete``, ``markllm-synonym``) on the
paper run's texts, in our harness (issue 66; a small table, not a grid).

Texts: the first ``--prompts`` texts of each row of ``experiments/runs/paper`` (12 sentences,
its public key), cut to their first 3, 6 and 12 sentences. A token row's shorter text is the
same run's beginning (same seed, same tokens); a sentence row's too (it writes sentence by
sentence). Each text is attacked under its own seed (the item's), detected by the row's
scheme with the run's key, and the attack's fidelity is measured as the harness measures
every attack (``samark.evaluation.fidelity.measure``, under the embedder that is not the
watermark's).

    python -m benchmarks.studies.markllm_attacks --prompts 10 \
        -o docs/results/2026-12-05-markllm/attacks.json
    python -m benchmarks.studies.markllm_attacks \
        --table docs/results/2026-12-05-markllm/attacks.json
"""

from __future__ import annotations

import argparse
import json
import zlib
from pathlib import Path

import numpy as np

ROWS = ("KGW", "Unigram", "SynthID", "SAMark (layered)")
ATTACKS = (
    ("none", None, 0.0),
    ("WordDeletion 0.1", "markllm-word-delete", 0.1),
    ("WordDeletion 0.3", "markllm-word-delete", 0.3),
    ("SynonymSubstitution 0.3", "markllm-synonym", 0.3),
    ("SynonymSubstitution 0.5", "markllm-synonym", 0.5),
)
LENGTHS = (3, 6, 12)
ALPHA = 0.01


def run(run_dir: Path, prompts: int, rows: tuple[str, ...]) -> dict:
    import torch

    from samark.embed import load_embedder
    from samark.errors import EmptyTextError
    from samark.evaluation.attacks import create_attack
    from samark.evaluation.fidelity import fidelity_embedder, measure
    from samark.evaluation.runner import Run
    from samark.segment import split_sentences

    torch.set_num_threads(1)
    paper = Run.open(run_dir, prompts=prompts)
    specs = {s.label: s for s in paper.experiment.schemes}
    grader = load_embedder(fidelity_embedder(paper.experiment.embedder))
    attackers = {label: create_attack(name, ratio=r) for label, name, r in ATTACKS if name}
    out: dict = {"prompts": prompts, "rows": {}, "fidelity": {}}
    originals: dict[str, list[str]] = {label: [] for label in attackers}
    edited: dict[str, list[str]] = {label: [] for label in attackers}
    for row in rows:
        spec = specs[row]
        scheme = paper.scheme(spec)
        gens = paper.row_generations(spec, written=True)
        for n in LENGTHS:
            ps: dict[str, list[float]] = {label: [] for label, _, _ in ATTACKS}
            for g in gens:
                text = " ".join(split_sentences(g["text"])[:n])
                seed = zlib.crc32(f"{g['item']}/{n}".encode())
                for label, _, _ in ATTACKS:
                    attacked = text if label == "none" else attackers[label].apply(text, seed=seed)
                    if label != "none":
                        originals[label].append(text)
                        edited[label].append(attacked)
                    try:
                        ps[label].append(float(scheme.detect(attacked).p_value))
                    except EmptyTextError:
                        ps[label].append(1.0)
            out["rows"].setdefault(row, {})[str(n)] = ps
            print(row, n, {k: sum(p < ALPHA for p in v) for k, v in ps.items()}, flush=True)
    for label in attackers:
        fid = measure(grader, originals[label], edited[label])
        out["fidelity"][label] = {
            "aligned_similarity": float(np.median([f.aligned_similarity for f in fid])),
            "word_overlap": float(np.median([f.word_overlap for f in fid])),
            "texts": len(fid),
        }
    out["grader"] = grader.name
    return out


def table(result: dict) -> str:
    labels = [label for label, _, _ in ATTACKS]
    head = ["row", "sentences", *labels]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row, by_len in result["rows"].items():
        for n, ps in by_len.items():
            cells = [f"{sum(p < ALPHA for p in ps[label])} / {len(ps[label])}" for label in labels]
            lines.append(f"| {row} | {n} | " + " | ".join(cells) + " |")
    fid = result["fidelity"]
    lines += [
        "",
        f"Fidelity (median over every attacked text above, graded by {result['grader']}):",
        "",
        "| attack | aligned similarity | word overlap | texts |",
        "|---|---|---|---|",
    ]
    for label, f in fid.items():
        lines.append(
            f"| {label} | {f['aligned_similarity']:.3f} | {f['word_overlap']:.3f} | {f['texts']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, default=Path("experiments/runs/paper"))
    parser.add_argument("--prompts", type=int, default=10)
    parser.add_argument("--rows", nargs="+", default=list(ROWS))
    parser.add_argument("-o", "--out", type=Path)
    parser.add_argument("--table", type=Path, help="print the table of a stored result")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return
    result = run(args.run, args.prompts, tuple(args.rows))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result) + "\n")
    print(table(result))


if __name__ == "__main__":
    main()
