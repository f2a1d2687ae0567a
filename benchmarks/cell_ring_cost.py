"""What a keyring with SAMark's keyed semantic cells costs (issue 44): memory and time of
one ring of ``--keys`` keys (drawn as ``samark keygen`` draws them; the default embedder,
all-mpnet-base-v2) with ``--cells`` cells, detecting ``--texts`` six-sentence CNN/DailyMail
windows with the commands' statistic (scan) at alpha 1%.

The ring needs ``ring_null_count(K, alpha)`` null cell draws (8,000 for 8 keys). With
``--null-draws full`` (keys written before 2026-11-28) those that fit in
``HELD_NULL_CELLS`` cell sets are built once and held; the rest are regenerated chunk by
chunk in every detection call (one pass for all the texts of the call). With
``--null-draws projected`` (a new key's) every text draws them in its own span
(samark.schemes.samark.null_projection). Each size runs in a process of its own, so that
its peak memory is its own.

    python benchmarks/cell_ring_cost.py --keys 8 64 1000 --cells 64 --texts 32
    python benchmarks/cell_ring_cost.py --keys 8 --cells 64 --null-draws full
    python benchmarks/cell_ring_cost.py --keys 8 64 1000 --cells 64 --null-stop 10

``--null-stop H``: sequential draws (Besag and Clifford), a text's draws stop once every
key's statistic has been reached H times; the texts here are human, so this is the cost
of text no key marked (a marked text draws everything, as without it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time


def measure(
    keys: int, cells: int, texts: int, alpha: float, null_draws: str, null_stop: int | None
) -> dict[str, float | int | str | None]:
    """One ring's figures, in this process."""
    import torch

    torch.set_num_threads(1)
    from samark import load_embedder, new_key
    from samark.datasets import human_windows, load_dataset
    from samark.detection.ring_detector import RingDetector
    from samark.keys.keyring import RingEntry
    from samark.schemes.base import SharedResources
    from samark.schemes.samark import SAMark
    from samark.schemes.samark.detector import embed_sentences

    embedder = load_embedder("all-mpnet-base-v2")
    windows = human_windows(load_dataset("cnn_dailymail")[100:], sentences=6, count=texts)
    batch = [w.text for w in windows]
    with embedder.remembering():
        embed_sentences(embedder, batch)  # embedding is not what is measured
        base_rss = _rss_mb()
        start = time.perf_counter()
        ring = [
            (RingEntry(f"k{i}", key.key_id, "2026-11-27T00:00:00+00:00"), key)
            for i, key in ((i, new_key(embedder)) for i in range(keys))
        ]
        detector = RingDetector.from_keys(
            ring,
            "samark",
            shared=SharedResources("smollm2-135m-instruct", embedder),
            alpha=alpha,
            statistic="scan",
            cells=cells,
            null_draws=null_draws,
            null_stop=null_stop,
        )
        built = time.perf_counter() - start
        draws = detector.schemes[0].detector.null_cell_draws  # type: ignore[attr-defined]
        assert isinstance(detector.schemes[0], SAMark) and draws is not None
        start = time.perf_counter()
        first = detector.detect(batch[0])  # builds the held block, streams the rest
        first_s = time.perf_counter() - start
        start = time.perf_counter()
        single = detector.detect(batch[1])
        single_s = time.perf_counter() - start
        start = time.perf_counter()
        many = detector.detect_many(batch)
        many_s = time.perf_counter() - start
    flagged = sum(1 for r in many if r is not None and r.is_watermarked)
    return {
        "keys": keys,
        "cells": cells,
        "null_draws": null_draws,
        "null_stop": null_stop,
        "method": detector.method,
        "draws": draws.count,
        "held_draws": getattr(draws, "held", 0),
        "peak_rss_over_models_mb": round(_rss_mb() - base_rss, 1),
        "build_s": round(built, 2),
        "first_text_s": round(first_s, 2),
        "one_text_s": round(single_s, 2),
        "texts": len(batch),
        "batch_s": round(many_s, 2),
        "batch_s_per_text": round(many_s / len(batch), 3),
        "human_flagged": flagged,
        "p_first": round(first.p_value, 4),
        "p_second": round(single.p_value, 4),
    }


def _rss_mb() -> float:
    """This process's peak resident memory so far, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, nargs="+", default=[8, 64])
    ap.add_argument("--cells", type=int, default=16)
    ap.add_argument("--texts", type=int, default=32)
    ap.add_argument("--alpha", type=float, default=0.01)
    ap.add_argument("--null-draws", choices=["full", "projected"], default="projected")
    ap.add_argument(
        "--null-stop",
        type=int,
        default=None,
        help="sequential draws: stop a text's draws at this many exceedances (projected)",
    )
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child process
    args = ap.parse_args()
    if args.one:
        print(
            json.dumps(
                measure(
                    args.keys[0],
                    args.cells,
                    args.texts,
                    args.alpha,
                    args.null_draws,
                    args.null_stop,
                )
            )
        )
        return
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, one torch "
        f"thread, {time.strftime('%Y-%m-%d')}"
    )
    for keys in args.keys:
        command = [sys.executable, __file__, "--one", "--keys", str(keys)]
        command += ["--cells", str(args.cells), "--texts", str(args.texts)]
        command += ["--alpha", str(args.alpha), "--null-draws", args.null_draws]
        if args.null_stop is not None:
            command += ["--null-stop", str(args.null_stop)]
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        print(done.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
