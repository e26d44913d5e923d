#!/usr/bin/env bash
# The layer-norm experiment on the GPU machine (issue 15): hand-edited variants of tessera's
# generated kernel beside Triton's, timed, profiled (ncu) and disassembled. OUT: where results go.
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ln}
mkdir -p "$OUT"
python3 bench/experiments/ln_variants.py /tmp/ln_variants.cu || exit 1
nvcc -arch=sm_90 -O3 -std=c++17 -I include -Xptxas -v /tmp/ln_variants.cu -o /tmp/lnv > "$OUT/nvcc.txt" 2>&1 || { cat "$OUT/nvcc.txt"; exit 1; }
/tmp/lnv | tee "$OUT/variants.txt"
python3 bench/experiments/triton_ln.py "$OUT" | tee "$OUT/triton.txt"
cuobjdump -sass /tmp/lnv > "$OUT/variants.sass" 2>&1
[ -f "$OUT/triton_ln.cubin" ] && nvdisasm "$OUT/triton_ln.cubin" > "$OUT/triton_ln.sass" 2>&1
[ "${NCU:-1}" = 0 ] && exit 0  # NCU=0: timings only
S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis"
for k in k_base k_nobar_cvt; do
  timeout 120 ncu --clock-control none --kernel-name "$k" --launch-count 1 $S /tmp/lnv > "$OUT/ncu_$k.txt" 2>&1
done
timeout 120 ncu --clock-control none --kernel-name regex:layer_norm --launch-count 1 $S python3 bench/experiments/triton_ln.py /tmp > "$OUT/ncu_triton.txt" 2>&1
grep -E "Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Theoretical Occupancy|Block Limit Reg" "$OUT"/ncu_*.txt
