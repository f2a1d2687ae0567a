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

    python -m benchmarks.studies.forgery piggyback experiments/runs/paper --out F.jsonl
    python -m benchmarks.studies.forgery semantic experiments/runs/paper --out F.jsonl
    python -m benchmarks.studies.forgery stealing experiments/runs/paper --out F.jsonl
    python -m benchmarks.studies.forgery more-marked experiments/runs/paper --row Unigram \
        --forgeries 60 --sentences 6 --out MORE.jsonl
    python -m benchmarks.studies.forgery stealing experiments/runs/paper --extra MORE.jsonl \
        --cells Unigram:100 --forgeries 20 --out F.jsonl
    python -m benchmarks.studies.forgery localise experiments/runs/paper --out F.jsonl
    python -m benchmarks.studies.forgery precision experiments/runs/paper --out F.jsonl \
        --counts 10,20,40
    python -m benchmarks.studies.forgery table --out F.jsonl --plot forgery.png

Each cell is one JSONL line (appended); ``table`` prints the Markdown table and plots.
A cell's detection and its share detected are ``samark.evaluation.forgery``'s (the
harness an operator runs on their own deployment: ``measure_forgery``).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

ALPHA = 0.01
TOKEN_ROWS = ["KGW", "SynthID", "Unigram", "MorphMark", "EXP", "UPV"]
LAYERED = "SAMark (layered)"
#: the piggyback levels (also the provenance record's, benchmarks/studies/provenance_attacks.py)
LEVELS: dict[str, dict[str, int]] = {
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


def _each(dets: list[tuple[str, Any, str]], texts: list[str]) -> list[tuple[str, list[float]]]:
    """(detector label, p-values of ``texts``), each scheme detecting the texts once."""
    from samark.evaluation.forgery import detect_forgeries

    found: dict[int, list[Any]] = {}
    out = []
    for label, scheme, how in dets:
        if id(scheme) not in found:
            found[id(scheme)] = detect_forgeries(scheme, texts)
        out.append((label, _p_values(found[id(scheme)], how)))
    return out


def _p_values(dets: list[Any], how: str = "p") -> list[float]:
    from samark.schemes.samark.layered import combine_p_values

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
    from samark.evaluation.forgery import ForgeryOutcome

    outcome = ForgeryOutcome.of(ps, ALPHA)
    return {
        "attack": attack,
        "target": target,
        "detector": detector,
        "n": n,
        "forgeries": outcome.forgeries,
        "detected": outcome.detected,
        "median_p": outcome.median_p,
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
        for label, ps in _each(dets, texts):
            _write(args.out, _row("original", target, label, 0, ps))
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
            for label, ps in _each(dets, forged):
                _write(args.out, _row(f"piggyback {level}", target, label, 1, ps, **meaning))
        print(f"  {target}: {time.perf_counter() - start:.0f} s", flush=True)


def semantic(args: argparse.Namespace) -> None:
    from benchmarks.human_texts import stored_test_corpora
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
                estimator=args.estimator,
            )
            slots = ["x. " * 12] * args.forgeries  # 12 sentences a forgery
            forged = attack.apply_batch(slots, seeds=list(range(args.forgeries)))
            name = "semantic" + (" orthant" if args.estimator == "orthant" else "")
            for label, ps in _each(dets, forged):
                _write(args.out, _row(name, target, label, n, ps))


def stealing(args: argparse.Namespace) -> None:
    from samark.evaluation.attacks import create_attack
    from samark.evaluation.forgery import detect_forgeries

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
            ps = _p_values(detect_forgeries(run.scheme(specs[row]), forged))
            _write(args.out, _row("stealing", row, row, n_used, ps, **quality))
        found = detect_forgeries(layered, forged)
        for label, how in [("layered fisher", "p"), ("layered both", "both")]:
            ps = _p_values(found, how)
            name = LAYERED if n_used == 0 else target
            _write(args.out, _row("stealing", name, label, n_used, ps, **quality))
        print(f"  {cell}: {time.perf_counter() - start:.0f} s", flush=True)


def localise(args: argparse.Namespace) -> None:
    """Where the mark sits in a piggybacked text: the detector's per-sentence p-values
    (``Detection.marked_sentences(0.05)``) of inserted false sentences, edited sentences
    (negated, numbers or names changed) and untouched ones, after the heavy piggyback."""
    from samark.evaluation.attacks import create_attack
    from samark.evaluation.attacks.piggyback import is_false_claim
    from samark.segment import split_sentences

    run, specs = _open(args.run)
    for target, label in (("SAMark", "SAMark z"), (LAYERED, "layered fisher")):
        scheme = run.scheme(specs[target])
        attack = create_attack("piggyback", **LEVELS["heavy"])
        marked: dict[str, list[int]] = {"inserted": [], "edited": [], "untouched": []}
        texts = [g["text"] for g in run.row_generations(specs[target], written=True)]
        for i, text in enumerate(texts[: args.texts]):
            forged, _ = attack.edits(text, random.Random(1000 + i))
            original = set(split_sentences(text))
            d = scheme.detect(forged)
            hits = set(d.marked_sentences(0.05))
            for j, sentence in enumerate(split_sentences(forged)):
                kind = (
                    "untouched"
                    if sentence in original
                    else "inserted"
                    if is_false_claim(sentence)
                    else "edited"
                )
                marked[kind].append(int(j in hits))
        row = {
            "attack": "piggyback localisation",
            "target": target,
            "detector": label,
            "n": 1,
            "texts": min(args.texts, len(texts)),
            **{f"{k}_sentences": len(v) for k, v in marked.items()},
            **{f"{k}_marked": float(np.mean(v)) if v else float("nan") for k, v in marked.items()},
        }
        with args.out.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        print(
            f"{label}: sentences with p < 0.05: "
            + ", ".join(
                f"{k} {100 * row[f'{k}_marked']:.1f}% of {len(v)}" for k, v in marked.items()
            )
        )


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
    prompts = _fresh_prompts(run, 40, args.forgeries)  # after the forger's prompts
    if len(prompts) < args.forgeries:
        raise SystemExit(f"only {len(prompts)} fresh prompts")
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
        texts = [g["text"] for g in run.row_generations(specs[target], written=True)]
        if args.extra is not None:  # more of the row's texts (more_marked)
            lines = args.extra.read_text(encoding="utf-8").splitlines()
            texts += [r["text"] for r in map(json.loads, lines) if r["scheme"] == target]
        marked = [encode(t) for t in texts]
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
        if "precision" in r or "localisation" in r["attack"]:
            continue
        if "facts_changed" in r:
            extra = (
                f"{r['facts_changed']:.1f} facts changed, {100 * r['sentences_edited']:.0f}% of "
                f"sentences; aligned sim {r['aligned_similarity']:.3f}"
            )
        elif "distinct2" in r:
            extra = f"Distinct-2 {r['distinct2']:.3f}, rep-4 {r['rep4']:.1f}%"
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
    for r in rows:
        if "localisation" in r["attack"]:
            print(
                f"{r['detector']}, heavy piggyback, {r['texts']} texts: sentences with p < 0.05 "
                + ", ".join(
                    f"{k} {100 * r[k + '_marked']:.1f}% of {r[k + '_sentences']}"
                    for k in ("inserted", "edited", "untouched")
                )
            )
    if args.plot:
        plot([r for r in rows if "precision" not in r and "texts" not in r], args.plot)


def _n_of(setting: str) -> int:
    digits = "".join(ch if ch.isdigit() else " " for ch in setting).split()
    return int(digits[0]) if digits else -1


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Three panels, one per attack, each a horizontal bar per detector and setting: the
    share of forgeries detected at p < 0.01 (the attacker's success)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def bars(attacks: dict[str, str], keep: Any) -> list[tuple[str, str, float, int]]:
        out = []
        for r in rows:
            if r["attack"] in attacks and keep(r):
                r = {**r, "n": 40 if r["n"] == 39 else r["n"]}  # Unigram's row wrote 39 texts
                out.append(
                    (r["detector"], attacks[r["attack"]].format(**r), r["detected"], r["forgeries"])
                )
        return sorted(out, key=lambda c: (c[1].startswith("n ="), _n_of(c[1])))

    panels = [
        (
            "Piggyback: the operator's own text, facts changed",
            bars(
                {
                    "original": "unedited",
                    "piggyback light": "light (~5 facts)",
                    "piggyback heavy": "heavy (~9 facts)",
                },
                lambda r: True,
            ),
        ),
        (
            "Token stealing: the forger's own text",
            bars(
                {"stealing": "n = {n}"},
                lambda r: (
                    r["detector"] == r["target"]
                    or (r["target"] == LAYERED and r["detector"].startswith("layered"))
                ),
            ),
        ),
        (
            "Semantic stealing: public human sentences",
            bars({"semantic": "n = {n}", "semantic orthant": "n = {n}, orthant"}, lambda r: True),
        ),
    ]
    settings_colours = ["#9e9e9e", "#ff7f0e", "#d62728", "#1f77b4", "#2ca02c", "#9467bd"]
    fig, axes = plt.subplots(1, 3, figsize=(17, 8.2), dpi=100)
    for ax, (title, cells) in zip(axes, panels, strict=True):
        settings = list(dict.fromkeys(c[1] for c in cells))
        detectors = list(dict.fromkeys(c[0] for c in cells))
        height = 0.8 / max(1, len(settings))
        for k, setting in enumerate(settings):
            for d, detector in enumerate(detectors):
                hit = [c for c in cells if c[0] == detector and c[1] == setting]
                if not hit:
                    continue
                _, _, share, count = hit[0]
                y = d + (k - (len(settings) - 1) / 2) * height
                ax.barh(
                    y,
                    100 * share,
                    height=height * 0.9,
                    color=settings_colours[k % len(settings_colours)],
                    label=setting
                    if d
                    == next(
                        i
                        for i, x in enumerate(detectors)
                        if any(c[0] == x and c[1] == setting for c in cells)
                    )
                    else None,
                )
                ax.text(
                    100 * share + 1, y, f"{100 * share:.0f}% ({count})", va="center", fontsize=7
                )
        ax.set_yticks(range(len(detectors)), detectors, fontsize=9)
        ax.invert_yaxis()
        ax.axvline(1, color="k", ls="--", lw=0.8)
        ax.set_xlim(0, 115)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("forged texts detected at p < 0.01 (%)  (count: forgeries)")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=3, fontsize=8)
    fig.suptitle(
        "Forgery on the paper run's texts (SmolLM2-135M, 12 sentences): what the detector "
        "wrongly attributes to the key; dashed: 1%",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "what",
        choices=[
            "piggyback",
            "semantic",
            "stealing",
            "precision",
            "more-marked",
            "localise",
            "table",
        ],
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
    ap.add_argument("--estimator", default="scatter", help="semantic: scatter or orthant")
    ap.add_argument("--row", default="Unigram", help="more-marked: the token row to write")
    ap.add_argument("--extra", type=Path, default=None, help="stealing: more-marked's texts")
    args = ap.parse_args()
    if args.what != "table":
        _threads()
    commands = {
        "piggyback": piggyback,
        "semantic": semantic,
        "stealing": stealing,
        "precision": precision,
        "more-marked": more_marked,
        "localise": localise,
        "table": table,
    }
    commands[args.what](args)


if __name__ == "__main__":
    main()
