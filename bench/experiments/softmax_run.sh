#!/usr/bin/env bash
# The softmax experiment on the GPU machine (issue 15): tessera's generated kernels and edits of them
# (fast exp, division) beside Triton's, timed; with nvcc's --fmad=false (as tessera compiles) and true.
cd "$(dirname "$0")/../.."
python3 bench/experiments/softmax_variants.py /tmp/smv.cu || exit 1
for fmad in false; do
  nvcc -arch=sm_90 -O3 -std=c++17 -I include -diag-suppress 177 --fmad=$fmad /tmp/smv.cu -o /tmp/smv_$fmad || exit 1
  echo "== nvcc --fmad=$fmad"
  /tmp/smv_$fmad
done
python3 bench/experiments/triton_softmax.py
