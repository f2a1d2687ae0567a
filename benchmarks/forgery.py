"""Forgery resistance (issue 36): the share of forged texts each scheme's detector flags at
p < 0.01, with what the forgery cost in meaning or quality.

The forger's material is a run's own marked texts (the paper run: 40 marked 12-sentence
texts per row, written with its public research key, which rebuilds every detector here;
the forger never uses the key). Three attacks (``samark.evaluation.attacks``):

- ``piggyback``: every row's texts with their facts changed (light: 2 negations, 2 numbers,
  1 name swap, 1 false sentence; heavy: 4, 3, 2, 3), detected by the row's detector;
  meaning change as edit counts and the harness's fidelity (MiniLM);
- ``semantic``: ``semantic-stealing`` from n of the SAMark (or layered) row's texts, 12
  public human sentences a forgery (the calibration corpora, never seen by the key);
- ``stealing``: ``token-stealing`` from n of a token row's texts against the Unwatermarked
  row's (same model, same prompts), continuing CNN/DailyMail prompts the run did not use;
  ``n = 0`` is the control (the forger's model, no bias).

    python benchmarks/forgery.py piggyback experiments/runs/paper --out F.jsonl
    python benchmarks/forgery.py semantic experiments/runs/paper --out F.jsonl
    python benchmarks/forgery.py stealing experiments/runs/paper --out F.jsonl
    python benchmarks/forgery.py more-marked experiments/runs/paper --row Unigram \
        --forgeries 60 --sentences 6 --out MORE.jsonl
    python benchmarks/forgery.py stealing experiments/runs/paper --extra MORE.jsonl \
        --cells Unigram:100 --forgeries 20 --out F.jsonl
    python benchmarks/forgery.py precision experiments/runs/paper --out F.jsonl --counts 10,20,40
    python benchmarks/forgery.py table --out F.jsonl --plot forgery.png

Each cell is one JSONL line (appended); ``table`` prints the Markdown table and plots.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ALPHA = 0.01
TOKEN_ROWS = ["KGW", "SynthID", "Unigram", "MorphMark", "EXP", "UPV"]
LAYERED = "SAMark (layered)"
LEVELS = {
    "light": {"negations": 2, "numbers": 2, "entities": 1, "insertions": 1},
    "heavy": {"negations": 4, "numbers": 3, "entities": 2, "insertions": 3},
}


def _threads() -> None:
    import torch

    torch.set_num_threads(1)


def _open(run_dir: Path) -> Any:
    from samark.evaluation.runner import Run

    run = Run.open(run_dir)
    return run, {s.label: s for s in run.experiment.schemes}


def _write(out: Path, row: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
    hits = f"{100 * row['detected']:.1f}% of {row['forgeries']}"
    print(f"{row['attack']:10} {row['target']:18} {row['detector']:24} n={row['n']:<3} {hits}")


def _detections(scheme: Any, texts: list[str]) -> list[Any]:
    from samark.errors import EmptyTextError

    out = []
    for t in texts:
        try:
            out.append(scheme.detect(t))
        except EmptyTextError:
            out.append(None)
    return out


def _p_values(dets: list[Any], how: str = "p") -> list[float]:
    from samark.schemes.samark_layered import combine_p_values

    ps = []
    for d in dets:
        if d is None:
            ps.append(1.0)
        elif how == "both":
            ps.append(
                combine_p_values(d.details["p_semantic"], d.details["p_token"], method="both")
            )
        elif how in ("p_semantic", "p_token"):
            ps.append(float(d.details[how]))
        else:
            ps.append(float(d.p_value))
    return ps


def _row(attack: str, target: str, detector: str, n: int, ps: list[float], **extra: Any) -> dict:
    return {
        "attack": attack,
        "target": target,
        "detector": detector,
        "n": n,
        "forgeries": len(ps),
        "detected": float(np.mean(np.asarray(ps) < ALPHA)),
        "median_p": float(np.median(ps)),
        **extra,
    }


def _quality(texts: list[str]) -> dict[str, float]:
    from samark.evaluation.text_metrics import distinct_2, four_gram_repeat

    return {
        "distinct2": float(np.mean([distinct_2(t) for t in texts])),
        "rep4": float(np.mean([four_gram_repeat(t) for t in texts])),
    }


def _detectors(run: Any, specs: dict, target: str) -> list[tuple[str, Any, str]]:
    """(detector label, scheme, how its p is read) for a row's texts."""
    if target == LAYERED:
        s = run.scheme(specs[LAYERED])
        return [
            ("layered fisher", s, "p"),
            ("layered both", s, "both"),
            ("layered semantic", s, "p_semantic"),
            ("layered token", s, "p_token"),
        ]
    if target == "SAMark":
        return [
            ("SAMark z", run.scheme(specs["SAMark"]), "p"),
            ("SAMark scan", run.scheme(specs["SAMark (scan)"]), "p"),
        ]
    return [(target, run.scheme(specs[target]), "p")]


def piggyback(args: argparse.Namespace) -> None:
    from samark.embed import load_embedder
    from samark.evaluation.attacks import create_attack
    from samark.evaluation.fidelity import measure

    run, specs = _open(args.run)
    encoder = load_embedder("all-minilm-l6-v2")
    for target in args.rows.split(","):
        gens = run.row_generations(specs[target], written=True)[: args.texts]
        texts = [g["text"] for g in gens]
        dets = _detectors(run, specs, target)
        start = time.perf_counter()
        originals = [d for d in _detections(dets[0][1], texts)]
        for label, _, how in dets:
            _write(args.out, _row("original", target, label, 0, _p_values(originals, how)))
        for level, counts in LEVELS.items():
            attack = create_attack("piggyback", **counts)
            forged, edits = [], []
            for i, t in enumerate(texts):
                f, e = attack.edits(t, random.Random(1000 + i))
                forged.append(f)
                edits.append(e.to_dict())
            fid = measure(encoder, texts, forged)
            meaning = {
                k: float(np.mean([e[k] for e in edits]))
                for k in ("facts_changed", "negations", "numbers", "entity_swaps", "inserted")
            }
            meaning["sentences_edited"] = float(np.mean([e["sentences_edited"] for e in edits]))
            meaning["aligned_similarity"] = float(np.median([f.aligned_similarity for f in fid]))
            meaning["word_overlap"] = float(np.median([f.word_overlap for f in fid]))
            meaning["ngram4_copy"] = float(np.median([f.ngram4_copy for f in fid]))
            found = _detections(dets[0][1], forged)
            for label, _, how in dets:
                _write(
                    args.out,
                    _row(f"piggyback {level}", target, label, 1, _p_values(found, how), **meaning),
                )
        print(f"  {target}: {time.perf_counter() - start:.0f} s", flush=True)


def semantic(args: argparse.Namespace) -> None:
    from human_texts import stored_test_corpora
    from samark.evaluation.attacks import create_attack

    run, specs = _open(args.run)
    _, sentences, vectors = stored_test_corpora(run.embedder)
    for target in args.rows.split(","):
        marked = [g["text"] for g in run.row_generations(specs[target], written=True)]
        dets = _detectors(run, specs, target)
        for n in [int(x) for x in args.counts.split(",")]:
            attack = create_attack(
                "semantic-stealing",
                marked=marked,
                n=n,
                embedder=run.experiment.embedder,
                pool_sentences=sentences,
                pool_vectors=vectors,
            )
            slots = ["x. " * 12] * args.forgeries  # 12 sentences a forgery
            forged = attack.apply_batch(slots, seeds=list(range(args.forgeries)))
            found = _detections(dets[0][1], forged)
            for label, _, how in dets:
                _write(args.out, _row("semantic", target, label, n, _p_values(found, how)))


def stealing(args: argparse.Namespace) -> None:
    from samark.evaluation.attacks import create_attack

    run, specs = _open(args.run)
    prompts = _fresh_prompts(run, 0, args.forgeries)
    base = [g["text"] for g in run.row_generations(specs["Unwatermarked"], written=True)]
    layered = run.scheme(specs[LAYERED])
    for cell in args.cells.split(","):
        target, n = cell.split(":")
        marked = [g["text"] for g in run.row_generations(specs[target], written=True)]
        if args.extra is not None:  # more of the row's texts (more_marked)
            lines = args.extra.read_text(encoding="utf-8").splitlines()
            marked += [r["text"] for r in map(json.loads, lines) if r["scheme"] == target]
        n_used = min(int(n), len(marked))
        start = time.perf_counter()
        attack = create_attack(
            "token-stealing",
            marked=marked,
            unmarked=base,
            n=n_used,
            generator=run.experiment.generator,
            sentences=args.sentences,
            delta=args.delta if n_used else 0.0,
        )
        forged = attack.apply_batch(prompts, seeds=list(range(len(prompts))))
        quality = _quality(forged)
        quality["seconds_per_forgery"] = (time.perf_counter() - start) / len(prompts)
        rows = TOKEN_ROWS if n_used == 0 else [target] if target != LAYERED else []
        for row in rows:
            ps = _p_values(_detections(run.scheme(specs[row]), forged))
            _write(args.out, _row("stealing", row, row, n_used, ps, **quality))
        found = _detections(layered, forged)
        for label, how in [("layered fisher", "p"), ("layered both", "both")]:
            ps = _p_values(found, how)
            name = LAYERED if n_used == 0 else target
            _write(args.out, _row("stealing", name, label, n_used, ps, **quality))
        print(f"  {cell}: {time.perf_counter() - start:.0f} s", flush=True)


def _fresh_prompts(run: Any, start: int, count: int) -> list[str]:
    """CNN/DailyMail prompts the run did not use: examples ``start`` to ``start + count``
    after the run's own."""
    from samark.datasets import load_dataset, prompt_examples

    d = run.experiment.dataset
    examples = prompt_examples(
        load_dataset(d.name),
        prompt_sentences=d.prompt_sentences,
        sentences=d.sentences,
        count=d.prompts + start + count,
    )
    return [e.prompt for e in examples[d.prompts + start :]]


def more_marked(args: argparse.Namespace) -> None:
    """More marked texts of a token row (the run's key, as its endpoint would write them),
    for stealing cells beyond the run's 40: prompts the run and the forger do not use."""
    run, specs = _open(args.run)
    scheme = run.scheme(specs[args.row])
    prompts = _fresh_prompts(run, 1000, args.forgeries)
    start = time.perf_counter()
    for i in range(0, len(prompts), 10):
        batch = scheme.generate_batch(
            prompts[i : i + 10], max_new_sentences=args.sentences, seed=7000 + i
        )
        with args.out.open("a", encoding="utf-8") as f:
            for g in batch:
                f.write(json.dumps({"scheme": args.row, "text": g.text}) + "\n")
        print(f"{i + len(batch)} texts, {time.perf_counter() - start:.0f} s", flush=True)


def precision(args: argparse.Namespace) -> None:
    """How right the stolen preferences are, checked against the key (a truth the forger
    never sees; no generation): the share of learned (context, token) pairs that are green
    for KGW (1-token context) and of learned tokens green for Unigram (no context), against
    gamma = 0.25 for a guess."""
    import torch

    from samark.evaluation.attacks.token_stealing import StolenPreferences
    from samark.schemes.lm_generate import vocab_size

    run, specs = _open(args.run)
    base = [g["text"] for g in run.row_generations(specs["Unwatermarked"], written=True)]
    for target in ("KGW", "Unigram"):
        scheme = run.scheme(specs[target])
        lm = scheme.lm
        encode = lambda t, lm=lm: lm.tokenizer(t, add_special_tokens=False)["input_ids"]  # noqa: E731
        marked = [encode(g["text"]) for g in run.row_generations(specs[target], written=True)]
        size = vocab_size(lm)
        if target == "KGW":
            proc = scheme.logits_processor()

            def green(ctx: tuple[int, ...], t: int, proc: Any = proc) -> bool:
                ids = proc._get_greenlist_ids(torch.tensor(ctx))  # type: ignore[union-attr]
                return bool((ids == t).any())
        else:
            mask = scheme.green_mask(size).numpy()

            def green(ctx: tuple[int, ...], t: int, mask: Any = mask) -> bool:
                return bool(mask[t])

        for n in [int(x) for x in args.counts.split(",")]:
            n = min(n, len(marked))
            stolen = StolenPreferences(marked[:n], [encode(t) for t in base], size, context=1)
            if target == "KGW":
                pairs = [
                    (ctx, int(t))
                    for ctx, (ids, sc) in stolen.by_context.items()
                    for t, v in zip(ids, sc, strict=True)
                    if v > 0
                ]
            else:
                pairs = [((), int(t)) for t in np.flatnonzero(stolen.context_free > 0)]
            right = [green(c, t) for c, t in pairs]
            row = {
                "attack": "stealing precision",
                "target": target,
                "detector": "green share of learned" + (" pairs" if target == "KGW" else " tokens"),
                "n": n,
                "learned": len(pairs),
                "precision": float(np.mean(right)) if right else float("nan"),
                "marked_tokens": stolen.marked_tokens,
            }
            with args.out.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
            print(f"{target} n={n}: {len(pairs)} learned, {100 * row['precision']:.1f}% green")


def table(args: argparse.Namespace) -> None:
    rows = [json.loads(line) for line in args.out.read_text().splitlines() if line.strip()]
    print(
        "| attack | target | detector | n | forgeries | detected p<0.01 (%) | median p "
        "| meaning / quality |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "precision" in r:
            continue
        if "facts_changed" in r:
            extra = (
                f"{r['facts_changed']:.1f} facts changed, {100 * r['sentences_edited']:.0f}% of "
                f"sentences; aligned sim {r['aligned_similarity']:.3f}"
            )
        elif "distinct2" in r:
            extra = f"Distinct-2 {r['distinct2']:.3f}, rep-4 {r['rep4']:.3f}"
        else:
            extra = ""
        print(
            f"| {r['attack']} | {r['target']} | {r['detector']} | {r['n']} | {r['forgeries']} | "
            f"{100 * r['detected']:.1f} | {r['median_p']:.2g} | {extra} |"
        )
    for r in rows:
        if "precision" in r:
            print(
                f"stolen {r['target']}, n = {r['n']} ({r['marked_tokens']} marked tokens): "
                f"{r['learned']} learned, {100 * r['precision']:.1f}% of them green (guess: 25%)"
            )
    if args.plot:
        plot([r for r in rows if "precision" not in r], args.plot)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """One panel per attack: share of forgeries detected per detector (bars)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("piggyback light", "Piggyback, light (6 facts)"),
        ("piggyback heavy", "Piggyback, heavy (12 facts)"),
        ("semantic", "Semantic stealing"),
        ("stealing", "Token stealing"),
    ]
    fig, axes = plt.subplots(1, 4, figsize=(16, 5.2), dpi=110, sharex=True)
    for ax, (attack, title) in zip(axes, panels, strict=True):
        cells = [r for r in rows if r["attack"] == attack]
        named = not attack.startswith("piggyback")
        labels = [r["detector"] + (f" (n={r['n']})" if named else "") for r in cells]
        values = [100 * r["detected"] for r in cells]
        colours = ["#d62728" if v >= 50 else "#ff7f0e" if v >= 5 else "#2ca02c" for v in values]
        y = np.arange(len(cells))
        ax.barh(y, values, color=colours)
        ax.set_yticks(y, labels, fontsize=8)
        ax.invert_yaxis()
        ax.axvline(1, color="k", ls="--", lw=0.8)
        for yi, v, r in zip(y, values, cells, strict=True):
            ax.text(min(v + 1, 80), yi, f"{v:.0f}% of {r['forgeries']}", va="center", fontsize=7)
        ax.set_xlim(0, 105)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("forgeries detected at p < 0.01 (%)")
    fig.suptitle(
        "Forgery: share of forged texts the detector attributes to the key "
        "(red >= 50%, orange >= 5%, green < 5%; dashed: 1%)",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "what", choices=["piggyback", "semantic", "stealing", "precision", "more-marked", "table"]
    )
    ap.add_argument("run", type=Path, nargs="?", help="a run folder (not for table)")
    ap.add_argument("--out", type=Path, required=True, help="JSONL of cells (table: reads it)")
    ap.add_argument("--rows", default=",".join([*TOKEN_ROWS, "SAMark", LAYERED]))
    ap.add_argument("--texts", type=int, default=40, help="piggyback: marked texts per row")
    ap.add_argument("--counts", default="10,40", help="semantic: marked texts the forger holds")
    ap.add_argument("--forgeries", type=int, default=40, help="forgeries per cell")
    ap.add_argument("--cells", default="KGW:0,Unigram:10,Unigram:40,KGW:10,KGW:40")
    ap.add_argument("--sentences", type=int, default=6, help="stealing: sentences a forgery")
    ap.add_argument("--delta", type=float, default=4.0, help="stealing: the forger's bias")
    ap.add_argument("--plot", type=Path, default=None)
    ap.add_argument("--row", default="Unigram", help="more-marked: the token row to write")
    ap.add_argument("--extra", type=Path, default=None, help="stealing: more-marked's texts")
    args = ap.parse_args()
    if args.what != "table":
        _threads()
        sys.path.insert(0, str(Path(__file__).resolve().parent))
    commands = {
        "piggyback": piggyback,
        "semantic": semantic,
        "stealing": stealing,
        "precision": precision,
        "more-marked": more_marked,
        "table": table,
    }
    commands[args.what](args)


if __name__ == "__main__":
    main()
