"""torch.compile on the seed's add_fn, on CPU tensors, for bench/compare_cpu.py.

On a machine without a GPU, Triton cannot run the seed's user kernel (Dynamo refuses the Triton
launcher on CPU), so the function is the same computation in PyTorch ops: `out = zeros_like(x);
out += x + y`. What is compared is the graph compiler's own cost: the first call with cold and
warm caches, the per-call time at n = 4, and the recompile when the size changes.

    python3 torch_compile_cpu.py first-call     # seconds to the first result (cold or warm by
                                                # TORCHINDUCTOR_CACHE_DIR)
    python3 torch_compile_cpu.py per-call       # microseconds per call at n = 4
    python3 torch_compile_cpu.py recompile      # seconds of the n = 5 call after n = 4
"""
import sys
import time
import warnings

warnings.filterwarnings("ignore")


def main():
    mode = sys.argv[1]
    import torch  # noqa: E402

    torch.set_num_threads(2)

    def add_fn(x, y):
        output = torch.zeros_like(x)
        output += x + y
        return output

    compiled = torch.compile(add_fn, fullgraph=True)
    x, y = torch.randn(4), torch.randn(4)
    if mode == "first-call":
        t0 = time.perf_counter()
        out = compiled(x, y)
        dt = time.perf_counter() - t0
        assert torch.allclose(out, x + y)
        print(dt)
    elif mode == "per-call":
        compiled(x, y)
        for _ in range(100):
            compiled(x, y)
        n = 3000
        t0 = time.perf_counter()
        for _ in range(n):
            compiled(x, y)
        print((time.perf_counter() - t0) / n * 1e6)
    elif mode == "recompile":
        compiled(x, y)
        x5, y5 = torch.randn(5), torch.randn(5)
        t0 = time.perf_counter()
        out = compiled(x5, y5)
        dt = time.perf_counter() - t0
        assert torch.allclose(out, x5 + y5)
        print(dt)


if __name__ == "__main__":
    main()
