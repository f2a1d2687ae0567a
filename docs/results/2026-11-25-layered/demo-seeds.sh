#!/bin/bash
# samark demo over seeds 1..20: the watermarked and paraphrased texts' p and each run's wall
# time (run from anywhere: bash docs/results/2026-11-25-layered/demo-seeds.sh)
cd "$(dirname "$0")/../../.." || exit 1
out=$(mktemp -d)
for s in $(seq 1 20); do
  start=$(date +%s.%N)
  samark demo --seed "$s" > "$out/demo_$s.out" 2> "$out/demo_$s.err"
  end=$(date +%s.%N)
  p=$(grep -E "^│ watermarked " "$out/demo_$s.out" | awk -F'│' '{print $4}' | tr -d ' ')
  para=$(grep -E "^│ paraphrased " "$out/demo_$s.out" | awk -F'│' '{print $4}' | tr -d ' ')
  printf "seed %2d  wall %5.1f s  watermarked p %s  paraphrased p %s\n" "$s" \
    "$(echo "$end - $start" | bc)" "$p" "$para"
done
