"""Edited-sentence recall of the record: what share of lightly edited served sentences
the record still finds, at its threshold and around it, on real edits (issue 67).

The paper run's texts (``experiments/runs/paper``: each scheme's generations and their
Word-S / Word-D attacks, real word substitutions and deletions) stand for served text and
its copyedits. Each edited sentence is aligned to its own text's served sentence it is
closest to (as ``benchmarks/record_index.py`` aligns its queries); the record finds it
when it is the same sentence after normalising (the keyed hash: ``served``) or when their
cosine is at least the threshold (``paraphrase``). Sentences under ``MIN_WORDS`` words are
matched verbatim only, as the record does. One record per text, so the nearest stored
sentence is the source (a record at scale can only find fewer: another stored sentence
may be nearer; ``record_index --edited`` measured that equal at 10k-1M).

    OMP_NUM_THREADS=1 python -m benchmarks.studies.edited_recall \
        --out docs/results/2026-12-05-edited-recall --texts 70
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.studies.record_at_scale import stored_texts

ATTACKS = ("Word-S 5%", "Word-S 15%", "Word-S 30%", "Word-D 5%", "Word-D 15%", "Word-D 30%")
THRESHOLDS = (0.85, 0.875, 0.89, 0.905, 0.92, 0.935)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--texts", type=int, default=70)
    args = p.parse_args()
    import torch

    from samark.embed import load_embedder
    from samark.provenance.normalise import normalise
    from samark.provenance.threshold import DEFAULT_THRESHOLDS, MIN_WORDS
    from samark.segment import split_sentences

    torch.set_num_threads(1)
    gens, edits = stored_texts(ATTACKS)
    chosen = [k for k in sorted(edits) if set(ATTACKS) <= set(edits[k]) and k in gens]
    chosen = chosen[: args.texts]
    embedder = load_embedder("all-mpnet-base-v2")
    threshold = DEFAULT_THRESHOLDS["all-mpnet-base-v2"]
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for t, key in enumerate(chosen):
        served = split_sentences(gens[key])
        src = embedder.encode(served)
        served_norm = [normalise(s) for s in served]
        for attack in ATTACKS:
            sentences = split_sentences(edits[key][attack])
            if not sentences:
                continue
            emb = embedder.encode(sentences)
            cos = emb @ src.T
            for i, sentence in enumerate(sentences):
                j = int(np.argmax(cos[i]))
                rows.append(
                    {
                        "text": t,
                        "attack": attack,
                        "verbatim": normalise(sentence) in served_norm,
                        "words": len(sentence.split()),
                        "cosine": round(float(cos[i, j]), 4),
                    }
                )
        if t % 10 == 9:
            log(f"{t + 1} of {len(chosen)} texts, {len(rows)} edited sentences")
    with (args.out / "sentences.jsonl").open("w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    summary = []
    for attack in ATTACKS:
        mine = [r for r in rows if r["attack"] == attack]
        changed = [r for r in mine if not r["verbatim"]]
        entry = {
            "attack": attack,
            "sentences": len(mine),
            "changed": len(changed),
            "verbatim_share": round(1 - len(changed) / len(mine), 4),
        }
        for thr in THRESHOLDS:
            found = [r for r in changed if r["words"] >= MIN_WORDS and r["cosine"] >= thr]
            entry[f"changed_found_at_{thr}"] = round(len(found) / max(len(changed), 1), 4)
        found_all = [
            r
            for r in mine
            if r["verbatim"] or (r["words"] >= MIN_WORDS and r["cosine"] >= threshold)
        ]
        entry["all_found_at_threshold"] = round(len(found_all) / len(mine), 4)
        summary.append(entry)
        log(json.dumps(entry))
    meta = {"texts": len(chosen), "threshold": threshold, "embedder": "all-mpnet-base-v2"}
    (args.out / "summary.json").write_text(json.dumps({**meta, "attacks": summary}, indent=1))


if __name__ == "__main__":
    main()
