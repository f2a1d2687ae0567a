#!/bin/bash
# samark demo over seeds 1..20: the watermarked text's p and the wall time of each run
cd /work/main
for s in $(seq 1 20); do
  start=$(date +%s.%N)
  samark demo --seed $s > /tmp/jobs/demo_$s.out 2>/tmp/jobs/demo_$s.err
  end=$(date +%s.%N)
  p=$(grep -E "^│ watermarked " /tmp/jobs/demo_$s.out | awk -F'│' '{print $4}' | tr -d ' ')
  para=$(grep -E "^│ paraphrased " /tmp/jobs/demo_$s.out | awk -F'│' '{print $4}' | tr -d ' ')
  printf "seed %2d  wall %5.1f s  watermarked p %s  paraphrased p %s\n" $s $(echo "$end - $start" | bc) "$p" "$para"
done
