"""PyTorch on the CPU workloads of bench/kernels_cpu.cpp: eager and torch.compile (Inductor, which
generates C++ for the CPU). Every variant writes into a preallocated output, as tessera's kernels
do, except eager layer norm (F.layer_norm, as users call it: its out= form computes then copies). Prints one JSON object of GB/s (bytes read + written per second) to stdout; each result is
checked against eager first. Usable alone:

    python3 bench/peers/torch_cpu.py [--min-time 0.5]

With --serve it sets up (and compiles) once, then measures once per line read from stdin and
prints a JSON line each time: bench/compare_cpu.py interleaves those rounds with tessera's and
Halide's without paying torch.compile's start-up every round.
"""
import argparse
import json
import os
import sys
import time
import warnings

warnings.filterwarnings("ignore")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def rate(fn, nbytes, min_time):
    """Bytes per second over a window of at least min_time seconds after warm-up (the mean, as
    Google Benchmark reports for tessera and Halide)."""
    for _ in range(3):
        fn()
    iters, t0 = 0, time.perf_counter()
    while True:
        fn()
        iters += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= min_time and iters >= 5:
            return nbytes * iters / elapsed / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-time", type=float, default=0.5)
    ap.add_argument("--serve", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count())
    torch.manual_seed(0)
    info = {"torch_version": torch.__version__, "threads": torch.get_num_threads()}

    n = 1 << 24
    a, b, c = torch.rand(n), torch.rand(n), torch.empty(n)

    def add_into(a, b, c):
        c.copy_(a + b)

    add_c = torch.compile(add_into, fullgraph=True)
    add_c(a, b, c)
    assert torch.equal(c, a + b)

    x, y = torch.randn(4096, 1024), torch.empty(4096, 1024)

    def softmax_into(x, y):
        y.copy_(torch.softmax(x, 1))

    softmax_c = torch.compile(softmax_into, fullgraph=True)
    softmax_c(x, y)
    torch.testing.assert_close(y, torch.softmax(x, 1))

    xl, yl = torch.randn(4096, 4096), torch.empty(4096, 4096)
    w, bias = torch.rand(4096), torch.randn(4096)

    def layer_norm_into(x, w, bias, y):
        y.copy_(F.layer_norm(x, (4096,), w, bias, 1e-5))

    ln_c = torch.compile(layer_norm_into, fullgraph=True)
    ln_c(xl, w, bias, yl)
    torch.testing.assert_close(yl, F.layer_norm(xl, (4096,), w, bias, 1e-5))

    def measure():
        t = args.min_time
        out = dict(info)
        out["add_eager"] = rate(lambda: torch.add(a, b, out=c), n * 12, t)
        out["add_compile"] = rate(lambda: add_c(a, b, c), n * 12, t)
        out["softmax_eager"] = rate(lambda: torch.ops.aten._softmax.out(x, 1, False, out=y), 4096 * 1024 * 8, t)
        out["softmax_compile"] = rate(lambda: softmax_c(x, y), 4096 * 1024 * 8, t)
        # F.layer_norm allocates its result (there is no out= form that does not compute then
        # copy); the allocation of 64 MiB is part of eager PyTorch's cost as users call it.
        out["layer_norm_eager"] = rate(lambda: F.layer_norm(xl, (4096,), w, bias, 1e-5), 4096 * 4096 * 8, t)
        out["layer_norm_compile"] = rate(lambda: ln_c(xl, w, bias, yl), 4096 * 4096 * 8, t)
        json.dump(out, sys.stdout)
        print(flush=True)

    if not args.serve:
        measure()
        return
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() == "quit":
            break
        measure()


if __name__ == "__main__":
    main()
