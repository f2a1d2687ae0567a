"""MarkLLM 0.1.5's offline attacks (``markllm-word-delete``, ``markllm-synonym``) on stored
runs' texts, in our harness and in MarkLLM's own pipeline through the adapter (issue 66).

Rows are ``RUN:LABEL`` (a run under ``experiments/runs``; a bare label is a row of
``--run``). Texts: the first ``--prompts`` texts of each row (12 sentences, the run's public
key), cut to their first 3, 6 and 12 sentences. A token row's shorter text is the
same run's beginning (same seed, same tokens); a sentence row's too (it writes sentence by
sentence). Each text is attacked under its own seed (the item's), detected by the row's
scheme with the run's key, and the attack's fidelity is measured as the harness measures
every attack (``samark.evaluation.fidelity.measure``, under the embedder that is not the
watermark's).

With ``--markllm-pipeline`` the same cut texts also go through MarkLLM's own
``UnWatermarkedTextDetectionPipeline`` (``text_source_mode="natural"``: it retrieves a stored
text, edits it with MarkLLM's editor and detects): the row's scheme behind
:class:`samark.integrations.markllm.SamarkWatermark`, MarkLLM's editors drawing from the
global random stream as MarkLLM runs them (seeded once a cell), and MarkLLM's
``FundamentalSuccessRateCalculator`` on the marked texts against ``--prompts`` human windows
of the same length (CNN/DailyMail articles 100 on, none a prompt).

    python -m benchmarks.studies.markllm_attacks --prompts 10 \
        -o docs/results/2026-12-05-markllm/attacks.json
    python -m benchmarks.studies.markllm_attacks --prompts 40 --markllm-pipeline \
        --rows KGW Unigram SynthID "vLLM Gumbel" SAMark "SAMark (layered)" \
        "default:samark-layered (default)" "default:N = 64" \
        -o docs/results/2026-12-05-markllm-attacks/attacks.json
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
RUNS = Path("experiments/runs")
ATTACKS = (
    ("none", None, 0.0),
    ("WordDeletion 0.1", "markllm-word-delete", 0.1),
    ("WordDeletion 0.3", "markllm-word-delete", 0.3),
    ("SynonymSubstitution 0.3", "markllm-synonym", 0.3),
    ("SynonymSubstitution 0.5", "markllm-synonym", 0.5),
)
LENGTHS = (3, 6, 12)
ALPHA = 0.01


def row_of(spec: str, run_dir: Path) -> tuple[Path, str]:
    """``RUN:LABEL`` -> (experiments/runs/RUN, LABEL); a bare label is ``run_dir``'s."""
    head, sep, label = spec.partition(":")
    if sep and (RUNS / head).is_dir():
        return RUNS / head, label
    return run_dir, spec


def markllm_pipeline(
    scheme: object,
    texts: list[str],
    editor: object | None,
    seed: int,
) -> list[object]:
    """``texts`` through MarkLLM's own pipeline: retrieved as stored, edited by MarkLLM's
    ``editor`` (the one our attack wraps; None: unedited), detected by the adapter."""
    import random

    from samark.evaluation.markllm_offline import offline
    from samark.integrations.markllm import SamarkWatermark

    with offline():
        from markllm.evaluation.dataset import BaseDataset
        from markllm.evaluation.pipelines.detection import (
            DetectionPipelineReturnType,
            UnWatermarkedTextDetectionPipeline,
        )

    editors = [editor] if editor is not None else []
    dataset = BaseDataset()
    dataset.natural_texts = texts
    dataset.prompts = [""] * len(texts)  # read by the pipeline, unused by its editors
    random.seed(seed)  # MarkLLM's editors draw from the global stream
    return list(
        UnWatermarkedTextDetectionPipeline(
            dataset,
            text_editor_list=editors,
            text_source_mode="natural",
            show_progress=False,
            return_type=DetectionPipelineReturnType.FULL,
        ).evaluate(SamarkWatermark(scheme))  # type: ignore[arg-type]
    )


def success_rates(marked: list, human: list) -> dict[str, float]:
    """MarkLLM's ``FundamentalSuccessRateCalculator`` on the adapter's flags."""
    from samark.evaluation.markllm_offline import offline

    with offline():
        from markllm.evaluation.tools.success_rate_calculator import (
            FundamentalSuccessRateCalculator,
        )
    flags = [r.detect_result["is_watermarked"] for r in marked]
    human_flags = [r.detect_result["is_watermarked"] for r in human]
    return dict(
        FundamentalSuccessRateCalculator(labels=["TPR", "FPR"]).calculate(flags, human_flags)
    )


def run(
    run_dir: Path,
    prompts: int,
    rows: tuple[str, ...],
    pipeline: bool = False,
    out_path: Path | None = None,
) -> dict:
    import torch

    from samark.datasets import human_windows, load_dataset
    from samark.embed import load_embedder
    from samark.errors import EmptyTextError
    from samark.evaluation.attacks import create_attack
    from samark.evaluation.fidelity import fidelity_embedder, measure
    from samark.evaluation.runner import Run
    from samark.segment import split_sentences

    torch.set_num_threads(1)
    runs: dict[Path, Run] = {}
    grader = None
    attackers = {label: create_attack(name, ratio=r) for label, name, r in ATTACKS if name}
    out: dict = {"prompts": prompts, "rows": {}, "fidelity": {}}
    if pipeline:
        out["markllm"] = {}
        articles = load_dataset("cnn_dailymail")[100:]
        humans = {
            n: [d.text for d in human_windows(articles, sentences=n, count=prompts)]
            for n in LENGTHS
        }
    originals: dict[str, list[str]] = {label: [] for label in attackers}
    edited: dict[str, list[str]] = {label: [] for label in attackers}
    for row_spec in rows:
        where, row = row_of(row_spec, run_dir)
        if where not in runs:
            runs[where] = Run.open(where, prompts=prompts)
        stored = runs[where]
        if grader is None:
            grader = load_embedder(fidelity_embedder(stored.experiment.embedder))
        spec = {s.label: s for s in stored.experiment.schemes}[row]
        scheme = stored.scheme(spec)
        gens = stored.row_generations(spec, written=True)
        name = row if where == run_dir else f"{row} ({where.name} run)"
        for n in LENGTHS:
            ps: dict[str, list[float]] = {label: [] for label, _, _ in ATTACKS}
            texts = [" ".join(split_sentences(g["text"])[:n]) for g in gens]
            for g, text in zip(gens, texts, strict=True):
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
            out["rows"].setdefault(name, {})[str(n)] = ps
            print(name, n, {k: sum(p < ALPHA for p in v) for k, v in ps.items()}, flush=True)
            if pipeline:
                human = markllm_pipeline(scheme, humans[n], None, 0)
                cells = {}
                for label, attack, _ in ATTACKS:
                    cell_seed = zlib.crc32(f"{name}/{n}/{label}".encode())
                    editor = attackers[label].editor if attack else None  # type: ignore[attr-defined]
                    marked = markllm_pipeline(scheme, texts, editor, cell_seed)
                    cells[label] = {
                        "p": [float(r.detect_result["p_value"]) for r in marked],
                        "human_p": [float(r.detect_result["p_value"]) for r in human],
                        **success_rates(marked, human),
                    }
                out["markllm"].setdefault(name, {})[str(n)] = cells
                tprs = {k: round(v["TPR"], 3) for k, v in cells.items()}
                print(" markllm pipeline", name, n, tprs, flush=True)
            if out_path is not None:  # a checkpoint a cell
                out_path.parent.mkdir(parents=True, exist_ok=True)
                out_path.write_text(json.dumps(out) + "\n")
    assert grader is not None
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
    if result.get("markllm"):
        lines += [
            "",
            "Through MarkLLM's pipeline (its editor in its global random stream, the adapter's",
            "detection; marked at p < 0.01 / texts, and MarkLLM's FundamentalSuccessRateCalculator",
            "FPR on as many human windows):",
            "",
            "| row | sentences | " + " | ".join(labels) + " | FPR |",
            "|" + "---|" * (len(labels) + 3),
        ]
        for row, by_len in result["markllm"].items():
            for n, cells in by_len.items():
                got = [
                    f"{sum(p < ALPHA for p in cells[lb]['p'])} / {len(cells[lb]['p'])}"
                    for lb in labels
                ]
                fpr = cells[labels[0]]["FPR"]
                lines.append(f"| {row} | {n} | " + " | ".join(got) + f" | {fpr:.3f} |")
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
    parser.add_argument(
        "--markllm-pipeline",
        action="store_true",
        help="also through MarkLLM's detection pipeline and success-rate calculator",
    )
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return
    result = run(args.run, args.prompts, tuple(args.rows), args.markllm_pipeline, args.out)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result) + "\n")
    print(table(result))


if __name__ == "__main__":
    main()
