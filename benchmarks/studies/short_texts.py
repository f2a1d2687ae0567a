"""Short texts (issue 65, item 2): the semantic statistic and the null floor at 3 sentences.

Reads a run's texts (every row given, as written and as each attack left them) and its
human negatives (the run's own continuations left out: they are the prompts' articles),
cuts each to its first ``--sentences`` sentences as the lengths stage does, embeds every
sentence once (cached in ``--cache``, an npz), and scores each text under the run's key and
its detector's null draws with several semantic statistics, all on the same draws: the exact
exchangeable p-value is valid for any statistic of the evidence. The token layer's p-value
is the run's own length record's (``details.p_token``), so the combined p-value is the
scheme's Fisher combination with its contradiction rule. Writes one JSONL row a text.

    python -m benchmarks.studies.short_texts experiments/runs/default \\
        --rows "samark-layered (default)" "N = 64" --out docs/results/.../scores.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from samark.schemes.samark.cells import NullCellDraws, cell_evidence
from samark.schemes.samark.layered import SAMarkLayered, combine_p_values
from samark.schemes.samark.statistics import exchangeable_p_value, scan, sentence_scores


def _full_sum(evidence: np.ndarray) -> np.ndarray:
    """Every sentence's weakest channel, summed over the sentences, / sqrt(n): the scan
    with no search (k = n)."""
    s = sentence_scores(evidence)
    return s.sum(axis=1) / np.sqrt(s.shape[1])


def _mean_all(evidence: np.ndarray) -> np.ndarray:
    """Mean evidence over sentences and channels (the ``alignment`` statistic)."""
    return evidence.reshape(evidence.shape[0], -1).mean(axis=1)


def _scan_channel_mean(evidence: np.ndarray) -> np.ndarray:
    """The scan over sentences scored by their channels' mean instead of their minimum."""
    scores = -np.sort(-evidence.mean(axis=2), axis=1)
    n = scores.shape[1]
    lo = max(1, int(np.ceil(0.25 * n)))
    curve = np.cumsum(scores, axis=1) / np.sqrt(np.arange(1, n + 1))
    return curve[:, lo - 1 :].max(axis=1)


CANDIDATES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "scan": scan,
    "full_sum": _full_sum,
    "mean_all": _mean_all,
    "scan_channel_mean": _scan_channel_mean,
}


def null_signed(scheme: SAMarkLayered, emb: np.ndarray) -> np.ndarray:
    """Every null draw's signed cosines for one text's embeddings, (M, n, c)."""
    draws = scheme.detector.null_cell_draws
    assert draws is not None
    if isinstance(draws, NullCellDraws):
        return np.concatenate([block.signed(emb) for block in draws.blocks()])
    return np.concatenate(list(draws.signed(emb)))


def main() -> None:
    from samark.evaluation.runner import Run
    from samark.evaluation.stages.length import prefix
    from samark.segment import split_sentences

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--rows", nargs="+", required=True)
    ap.add_argument("--sentences", type=int, default=3)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/short_texts_embeddings.npz"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--no-human", action="store_true", help="marked texts only (a held-out check)")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    run = Run.open(args.run)
    m = args.sentences
    texts: list[dict[str, Any]] = []
    for label in args.rows:
        spec = run.spec(label)
        exp = run.experiment
        attacks = [a for a in exp.attacks if a.label in exp.metrics.length_attacks]
        for item, attack, text in run.row_texts(spec, attacks):
            texts.append({"row": label, "item": item, "attack": attack, "text": prefix(text, m)})
    for doc in [] if args.no_human else run.row_negatives(run.spec(args.rows[0])):
        if not doc.id.endswith(":continuation"):
            texts.append(
                {"row": "human", "item": doc.id, "attack": "none", "text": prefix(doc.text, m)}
            )
    # the token layer's p-value: the run's own length record of the same text
    tokens: dict[tuple[str, str, str], float] = {}
    for line in (args.run / "lengths.jsonl").open():
        r = json.loads(line)
        if r["key"][0] == "length" and int(r["key"][-1]) == m:
            tokens[(r["scheme"], r["item"], r["attack"])] = float(r["details"]["p_token"])
            tokens[(r["scheme"], r["item"], r["attack"], "sem")] = float(  # type: ignore[index]
                r["details"]["p_semantic"]
            )
    scheme = run.scheme(run.spec(args.rows[0]))
    assert isinstance(scheme, SAMarkLayered)
    det = scheme.detector
    split = [split_sentences(t["text"]) for t in texts]
    flat = [s for ss in split for s in ss]
    if args.cache.exists() and int(np.load(args.cache)["count"]) == len(flat):
        embeddings = np.load(args.cache)["embeddings"]
    else:
        t0 = time.time()
        embeddings = det.embedder.encode(flat)
        np.savez(args.cache, embeddings=embeddings, count=len(flat))
        print(f"embedded {len(flat)} sentences in {time.time() - t0:.0f} s", flush=True)
    bounds = np.cumsum([0, *map(len, split)])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as out:
        for i, t in enumerate(texts):
            emb = embeddings[bounds[i] : bounds[i + 1]]
            if det.centring is not None:
                emb = det.centring(emb)
            assert det.key_cells is not None
            own = cell_evidence(det.key_cells.signed(emb), det.kappa, det.tanh_detection)
            null = cell_evidence(null_signed(scheme, emb), det.kappa, det.tanh_detection)
            p_tok = tokens.get((t["row"], t["item"], t["attack"]))
            row: dict[str, Any] = {k: t[k] for k in ("row", "item", "attack")}
            row["n"] = int(emb.shape[0])
            row["p_token"] = p_tok
            row["p_semantic_recorded"] = tokens.get((t["row"], t["item"], t["attack"], "sem"))  # type: ignore[arg-type]
            for name, stat in CANDIDATES.items():
                p = exchangeable_p_value(float(stat(own)[0]), stat(null))
                row[f"p_sem_{name}"] = p
                if p_tok is not None:
                    row[f"p_{name}"] = combine_p_values(p, p_tok)
            out.write(json.dumps(row) + "\n")
            if i % 100 == 0:
                print(f"{i}/{len(texts)} texts", flush=True)


if __name__ == "__main__":
    main()
