"""Triton's tutorial-05 layer norm (bench/peers/triton_gpu.py) at 16384x4096 bf16: its time, registers
and code facts (PTX and SASS written to the folder given), beside bench/experiments/ln_variants.cu."""
import importlib.util
import os
import re
import sys

import torch
import triton

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("triton_gpu", os.path.join(here, "..", "peers", "triton_gpu.py"))
tg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tg)
out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
M, N = 16384, 4096
dev = "cuda"
x = torch.randn(M, N, device=dev, dtype=torch.bfloat16)
w = torch.rand(N, device=dev, dtype=torch.bfloat16)
b = torch.randn(N, device=dev, dtype=torch.bfloat16)
y = torch.empty_like(x)
mean = torch.empty(M, device=dev)
rstd = torch.empty(M, device=dev)
flush = torch.empty(64 << 20, device=dev)
k = tg.layer_norm_fwd[(M,)](x, y, w, b, mean, rstd, N, N, 1e-5, BLOCK_SIZE=4096, num_warps=8)
us = tg.median_us(lambda: tg.layer_norm_fwd[(M,)](x, y, w, b, mean, rstd, N, N, 1e-5, BLOCK_SIZE=4096,
                                                    num_warps=8), flush)
print(f"triton layer norm: {us:.1f} us, {4.0 * M * N / us / 1e3:.0f} GB/s, {k.n_regs} regs, {k.n_spills} spills")
ptx = k.asm["ptx"]
open(os.path.join(out_dir, "triton_ln.ptx"), "w").write(ptx)
if "cubin" in k.asm:
    open(os.path.join(out_dir, "triton_ln.cubin"), "wb").write(k.asm["cubin"])
ops = {}
for line in ptx.splitlines():
    m = re.match(r"\s*(?:@%p\d+\s+)?([a-z]+(?:\.[a-z0-9]+)*)", line)
    if m and (m.group(1).startswith(("ld.", "st.", "bar", "shfl", "cvt", "red", "atom"))):
        ops[m.group(1)] = ops.get(m.group(1), 0) + 1
print("ptx ops:", dict(sorted(ops.items())))
