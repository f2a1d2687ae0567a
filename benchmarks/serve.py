"""``samark serve`` under load, on loopback: what an operator sizes a deployment by.

Starts ``samark serve`` in its own process (a throwaway key, no tokens) and prints:

1. ``/v1/detect`` of 12-sentence human texts (CNN/DailyMail) with ``--clients`` concurrent
   clients for ``--seconds``: requests/s, p50, p99, p99/p50, errors; and the same texts
   detected in-process one by one (the floor a server adds its overhead to).
2. ``--generate K``: K watermarked completions through the server against
   ``SAMark.generate`` in-process with the same settings and seeds (what the CLI does).
3. ``--upstream URL#MODEL``: unwatermarked completions (``"watermark": false``) through the
   server against the upstream directly: the latency the pass-through adds.
4. ``--batch N``: N of the texts as one ``{"texts": [...]}`` request against one request
   per text, one client: the server scores a batch's texts together (one embedding call,
   one pass over the null draws a group of 32).
5. ``--generation-clients 1,4,8``: watermarked completions from that many concurrent
   clients (``--per-client`` each, distinct prompts and seeds), against a server that runs
   them one at a time (``--concurrency 1``, first come first served) and one that batches
   their candidate draws (the default, ``--concurrency 8``): sentences/s, p50 and p99
   latency per completion, p99/p50, errors. ``--out FILE.jsonl`` keeps the rows.

    python benchmarks/serve.py --clients 8 --seconds 60
    python benchmarks/serve.py --generate 3 --candidates 16 --sentences 3
    python benchmarks/serve.py --generation-clients 1,4,8 --candidates 16 --sentences 2
    python benchmarks/serve.py --seconds 0 --batch 32
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

from samark.datasets import human_windows, load_dataset
from samark.models import DEFAULT_EMBEDDER
from samark.segment import split_sentences


def post(url: str, body: dict[str, Any], timeout: float = 600) -> tuple[int, float]:
    status, seconds, _ = post_json(url, body, timeout)
    return status, seconds


def post_json(url: str, body: dict[str, Any], timeout: float = 600) -> tuple[int, float, Any]:
    """Status, seconds and the JSON answer (None unless 200) of one POST."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    start = time.perf_counter()
    answer = None
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
            status = response.status
        answer = json.loads(raw) if status == 200 else None
    except urllib.error.HTTPError as exc:
        status = exc.code
    return status, time.perf_counter() - start, answer


def run_clients(clients: int, client: Any) -> float:
    """Run ``client(k)`` for k < ``clients`` in threads at once; the wall seconds."""
    start = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start


def start_server(
    key: Path, port: int, args: argparse.Namespace, concurrency: int = 8
) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable, "-m", "samark", "serve", "--key", str(key), "--port", str(port),
        "--no-auth", "--candidates", str(args.candidates), "--sentences", str(args.sentences),
        "--timeout", "1800", "--concurrency", str(concurrency),
    ]  # fmt: skip
    if args.upstream:
        cmd += ["--engine", args.upstream]  # the server engine answers "watermark": false
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    deadline = time.time() + 300
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                return proc
        except OSError:
            if proc.poll() is not None:
                log = proc.stderr.read().decode() if proc.stderr else ""
                raise SystemExit(f"samark serve failed:\n{log[-2000:]}") from None
            time.sleep(1)
    proc.kill()
    raise SystemExit("samark serve did not start in 300 s")


def detect_load(base: str, texts: list[str], clients: int, seconds: float) -> None:
    latencies: list[float] = []
    errors = 0
    stop = time.perf_counter() + seconds
    lock = threading.Lock()

    def client(offset: int) -> None:
        nonlocal errors
        i = offset
        while time.perf_counter() < stop:
            status, took = post(f"{base}/v1/detect", {"text": texts[i % len(texts)]})
            with lock:
                if status == 200:
                    latencies.append(took)
                else:
                    errors += 1
            i += clients

    wall = run_clients(clients, client)
    lat = np.array(latencies)
    p50, p99 = np.percentile(lat, [50, 99])
    print(
        f"/v1/detect, {clients} clients, {wall:.0f} s: {len(lat) / wall:.2f} texts/s, "
        f"p50 {p50:.3f} s, p99 {p99:.3f} s, p99/p50 {p99 / p50:.2f}, errors {errors}"
    )


def detect_batch(base: str, texts: list[str]) -> None:
    """The texts one request each, then as one batch request (answers compared)."""
    singles, single_s = [], 0.0
    for text in texts:
        status, took, answer = post_json(f"{base}/v1/detect", {"text": text})
        if status != 200:
            raise SystemExit(f"/v1/detect answered {status}")
        singles.append(answer["p_value"])
        single_s += took
    status, batch_s, answer = post_json(f"{base}/v1/detect", {"texts": texts})
    if status != 200:
        raise SystemExit(f"/v1/detect answered {status}")
    same = [a["p_value"] for a in answer["data"]] == singles
    print(
        f"/v1/detect of {len(texts)} texts, one client: one request each {single_s:.1f} s, "
        f"one batch request {batch_s:.1f} s ({single_s / batch_s:.2f}x); "
        f"the same p-values: {same}"
    )


def generation_load(
    base: str, prompts: list[str], clients: int, per_client: int, sentences: int
) -> dict[str, Any]:
    """``clients`` threads, each sending ``per_client`` watermarked completions in turn."""
    latencies: list[float] = []
    produced = errors = 0
    lock = threading.Lock()

    def client(k: int) -> None:
        nonlocal produced, errors
        for j in range(per_client):
            i = k * per_client + j
            body = {"prompt": prompts[i % len(prompts)], "seed": i, "max_sentences": sentences}
            try:
                status, took, answer = post_json(f"{base}/v1/completions", body, 1800)
                text = answer["choices"][0]["text"] if status == 200 else None
            except (OSError, KeyError, TypeError, ValueError):
                text = None
            with lock:
                if text is None:
                    errors += 1
                else:
                    latencies.append(took)
                    produced += len(split_sentences(text))

    wall = run_clients(clients, client)
    p50, p99 = (float(x) for x in np.percentile(latencies, [50, 99])) if latencies else (0, 0)
    return {
        "clients": clients,
        "completions": len(latencies),
        "sentences": produced,
        "wall_s": round(wall, 2),
        "sentences_per_s": round(produced / wall, 4),
        "p50_s": round(p50, 2),
        "p99_s": round(p99, 2),
        "p99_over_p50": round(p99 / p50, 3) if p50 else None,
        "errors": errors,
    }


def generation_table(key_file: Path, args: argparse.Namespace, prompts: list[str]) -> None:
    """Part 5: concurrent generation clients, served one at a time and batched."""
    counts = [int(c) for c in args.generation_clients.split(",")]
    rows = []
    for concurrency, mode in ((1, "one at a time"), (8, "batched")):
        proc = start_server(key_file, args.port, args, concurrency)
        base = f"http://127.0.0.1:{args.port}"
        try:
            post(f"{base}/v1/completions", {"prompt": prompts[-1], "max_sentences": 1})  # warm
            for clients in counts:
                row = {"mode": mode, "concurrency": concurrency, **generation_load(
                    base, prompts, clients, args.per_client, args.sentences
                )}  # fmt: skip
                rows.append(row)
                print(
                    f"{mode:>13}, {clients} clients: {row['sentences_per_s']:.3f} sentences/s, "
                    f"p50 {row['p50_s']:.1f} s, p99 {row['p99_s']:.1f} s, p99/p50 "
                    f"{row['p99_over_p50']}, errors {row['errors']} ({row['completions']} "
                    f"completions of {args.sentences} sentences, N = {args.candidates})",
                    flush=True,
                )
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    if args.out:
        with open(args.out, "w") as fh:
            for row in rows:
                fh.write(json.dumps({**row, "candidates": args.candidates}) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--texts", type=int, default=64, help="distinct 12-sentence texts")
    ap.add_argument("--generate", type=int, default=0, help="watermarked completions to time")
    ap.add_argument("--candidates", type=int, default=64)
    ap.add_argument("--sentences", type=int, default=12)
    ap.add_argument("--upstream", help="URL#MODEL: time the unwatermarked pass-through")
    ap.add_argument("--requests", type=int, default=20, help="pass-through requests")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the server")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--batch", type=int, default=0, help="texts of part 4 (0: skip it)")
    ap.add_argument("--generation-clients", help="e.g. 1,4,8: part 5 only")
    ap.add_argument("--per-client", type=int, default=2, help="completions per client")
    ap.add_argument("--out", help="JSONL rows of part 5")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from samark import SAMark, SAMarkConfig
    from samark.embed import load_embedder, new_key

    docs = load_dataset("cnn_dailymail")
    texts = [d.text for d in human_windows(docs, sentences=12, count=args.texts)]
    embedder = load_embedder(DEFAULT_EMBEDDER)
    key = new_key(embedder)
    config = SAMarkConfig.of(candidates=args.candidates, max_new_sentences=args.sentences)
    scheme = SAMark(key, config=config, embedder=embedder)
    with tempfile.TemporaryDirectory() as tmp:
        key_file = key.save(Path(tmp) / "bench.key")
        if args.generation_clients:
            print(f"machine: {os.cpu_count()} CPUs; server: {args.threads} torch thread(s)")
            generation_table(key_file, args, [d.text[:400] for d in docs[:64]])
            return
        proc = start_server(key_file, args.port, args)
        base = f"http://127.0.0.1:{args.port}"
        print(
            f"machine: {os.cpu_count()} CPUs; server: samark serve, {args.threads} torch "
            f"thread(s), {DEFAULT_EMBEDDER}; texts: {len(texts)} CNN windows of 12 sentences"
        )
        try:
            start = time.perf_counter()
            for text in texts:
                scheme.detect(text)
            alone = (time.perf_counter() - start) / len(texts)
            print(f"in-process detect, one by one: {1 / alone:.2f} texts/s ({alone:.3f} s/text)")
            if args.seconds > 0:
                detect_load(base, texts, args.clients, args.seconds)
            if args.batch:
                detect_batch(base, texts[: args.batch])
            for k in range(args.generate):
                prompt = docs[k].text[:400]
                _, served = post(f"{base}/v1/completions", {"prompt": prompt, "seed": k})
                start = time.perf_counter()
                scheme.generate(prompt, seed=k)
                direct = time.perf_counter() - start
                print(
                    f"watermarked completion {k}: server {served:.1f} s, in-process "
                    f"generate {direct:.1f} s ({served / direct:.2f}x)"
                )
            if args.upstream:
                url, _, model = args.upstream.partition("#")
                body = {"prompt": "The weather today", "max_tokens": 16, "model": model}
                direct_s = [post(f"{url}/completions", body)[1] for _ in range(args.requests)]
                through = [
                    post(f"{base}/v1/completions", {**body, "watermark": False})[1]
                    for _ in range(args.requests)
                ]
                d, s = float(np.median(direct_s)), float(np.median(through))
                print(
                    f"unwatermarked pass-through, median of {args.requests}: upstream {d:.3f} s, "
                    f"through samark {s:.3f} s (+{100 * (s / d - 1):.1f}%)"
                )
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
