"""Triton's tutorial-02 softmax (bench/peers/triton_gpu.py) at 4096x{1024,4096,16384} f32: its time,
registers and the PTX instructions that compute exp and the division (beside softmax_variants.cu)."""
import importlib.util
import os
import re

import torch

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("triton_gpu", os.path.join(here, "..", "peers", "triton_gpu.py"))
tg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tg)
flush = torch.empty(64 << 20, device="cuda")
for cols in (1024, 4096, 16384):
    x = torch.randn(4096, cols, device="cuda")
    out = torch.empty_like(x)
    w = tg.softmax_warps(cols)

    def run():
        return tg.softmax_kernel[(4096,)](out, x, x.stride(0), out.stride(0), cols, BLOCK_SIZE=cols,
                                          num_warps=w)
    k = run()
    us = tg.median_us(run, flush)
    ops = {}
    for line in k.asm["ptx"].splitlines():
        m = re.match(r"\s*(?:@%p\d+\s+)?([a-z0-9]+(?:\.[a-z0-9]+)*)", line)
        if m and m.group(1).startswith(("ex2", "div", "rcp", "mul.f32", "fma", "ld.global", "st.global", "bar")):
            ops[m.group(1)] = ops.get(m.group(1), 0) + 1
    print(f"triton softmax 4096x{cols}: {us:.1f} us, {8.0 * 4096 * cols / us / 1e3:.1f} GB/s, "
          f"{k.n_regs} regs, warps {w}; ptx: {dict(sorted(ops.items()))}")
