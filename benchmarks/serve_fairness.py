"""Is ``/v1/detect`` fair under load? Small checks' latency while the largest allowed batches
run, against the same checks on an idle server (issue 56).

Serves the default scheme (``samark-layered``, 64 keyed cells, projected null draws; the
default embedder) with uvicorn on loopback, then runs two phases of ``--seconds`` each:

1. idle: ``--small`` clients, each sending a two-sentence check, one after another;
2. loaded: the same small clients beside ``--large`` clients, each sending the largest
   batch the server allows (``max_detect_sentences`` sentences of news, ``max_batch``
   texts at most), one after another.

Prints p50 / p99 / max latency and errors per class and phase, and the small checks' p99
loaded over idle (the bar: within 2x). Writes one JSON line per request with ``--out``.

    python benchmarks/serve_fairness.py --small 2 --large 2 --seconds 60
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import numpy as np

TOKEN = "fairness-benchmark-token-0123456789"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=2, help="clients sending small checks")
    ap.add_argument("--large", type=int, default=2, help="clients sending the largest batch")
    ap.add_argument("--seconds", type=float, default=60.0, help="length of each phase")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import torch
    import uvicorn

    torch.set_num_threads(1)
    from samark.datasets import human_windows, load_dataset
    from samark.embed import load_embedder, new_key
    from samark.schemes import create_scheme
    from samark.segment import split_sentences
    from samark.serving import ServeSettings, scheme_app

    embedder = load_embedder("all-mpnet-base-v2")
    key = new_key(embedder, scheme="samark-layered")
    scheme = create_scheme(key=key, embedder=embedder, statistic="scan")
    settings = ServeSettings(tokens=frozenset({TOKEN}), request_timeout_s=600)
    windows = human_windows(load_dataset("cnn_dailymail"), sentences=12, count=200)
    large: list[str] = []
    total = 0
    for w in windows:
        n = len(split_sentences(w.text))
        if total + n > settings.max_detect_sentences or len(large) == settings.max_batch:
            break
        large.append(w.text)
        total += n
    small = " ".join(split_sentences(windows[-1].text)[:2])
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(scheme_app(scheme, settings), host="127.0.0.1", port=port, log_level="error")
    )
    threading.Thread(target=server.run, daemon=True).start()
    base = f"http://127.0.0.1:{port}"
    while _get(f"{base}/readyz") != 200:  # the models warm at start
        time.sleep(0.5)
    print(
        f"# {platform.machine()}, {os.cpu_count()} cores, one torch thread; a small check: 2 "
        f"sentences; a large batch: {len(large)} texts, {total} sentences "
        f"(max_detect_sentences {settings.max_detect_sentences}); {time.strftime('%Y-%m-%d')}",
        flush=True,
    )
    records: list[dict[str, Any]] = []
    for phase, large_clients in (("idle", 0), ("loaded", args.large)):
        records += _phase(base, phase, small, large, args.small, large_clients, args.seconds)
    server.should_exit = True
    _report(records)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as sink:
            for r in records:
                sink.write(json.dumps(r) + "\n")


def _phase(
    base: str,
    phase: str,
    small: str,
    large: list[str],
    small_clients: int,
    large_clients: int,
    seconds: float,
) -> list[dict[str, Any]]:
    stop = time.monotonic() + seconds
    out: list[dict[str, Any]] = []
    lock = threading.Lock()

    def client(kind: str, body: dict[str, Any]) -> None:
        while time.monotonic() < stop:
            start = time.perf_counter()
            status = _post(f"{base}/v1/detect", body)
            record = {
                "phase": phase,
                "kind": kind,
                "status": status,
                "seconds": time.perf_counter() - start,
            }
            with lock:
                out.append(record)

    threads = [
        threading.Thread(target=client, args=("small", {"text": small}))
        for _ in range(small_clients)
    ]
    threads += [
        threading.Thread(target=client, args=("large", {"texts": large}))
        for _ in range(large_clients)
    ]
    for i, t in enumerate(threads):
        t.start()
        if i >= small_clients:
            time.sleep(0.2)  # the large clients in turn, after the small ones
    for t in threads:
        t.join()
    return out


def _report(records: list[dict[str, Any]]) -> None:
    print("\n| phase | class | requests | errors | p50 s | p99 s | max s |")
    print("|---|---|---|---|---|---|---|")
    p99: dict[tuple[str, str], float] = {}
    for phase in ("idle", "loaded"):
        for kind in ("small", "large"):
            rows = [r for r in records if r["phase"] == phase and r["kind"] == kind]
            if not rows:
                continue
            ok = np.array([r["seconds"] for r in rows if r["status"] == 200])
            errors = sum(1 for r in rows if r["status"] != 200)
            if ok.size:
                p99[(phase, kind)] = float(np.percentile(ok, 99))
                print(
                    f"| {phase} | {kind} | {len(rows)} | {errors} | {np.percentile(ok, 50):.2f} | "
                    f"{p99[(phase, kind)]:.2f} | {ok.max():.2f} |"
                )
            else:
                print(f"| {phase} | {kind} | {len(rows)} | {errors} | - | - | - |")
    if ("idle", "small") in p99 and ("loaded", "small") in p99:
        ratio = p99[("loaded", "small")] / p99[("idle", "small")]
        print(f"\nsmall checks' p99, loaded over idle: {ratio:.2f}x (bar: within 2x)")


def _post(url: str, body: dict[str, Any]) -> int:
    request = urllib.request.Request(url, data=json.dumps(body).encode())
    request.add_header("authorization", f"Bearer {TOKEN}")
    request.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=900) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


if __name__ == "__main__":
    main()
