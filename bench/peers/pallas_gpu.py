"""JAX Pallas beside tessera::compile (issue 15): the seed's add_fn written as a Pallas kernel
called inside `jax.jit`, the other system that puts a user's tile kernel inside a graph compiler.
Prints the JSON lines of bench_gpu_kernels' rows of the same names (impl "JAX Pallas") for
bench/gpu_table.py; every result is checked against x + y first.

    python3 bench/peers/pallas_gpu.py first cold|warm   # the first call in this process (n = 4:
                                                        # trace, lower, compile), and the call at
                                                        # n = 5 that compiles it again; the cache:
                                                        # JAX's persistent compilation cache in
                                                        # $PALLAS_CACHE_DIR (cold: empty)
    python3 bench/peers/pallas_gpu.py compiled          # host time per call at n = 4 (2000 calls,
                                                        # then one wait, as bench_gpu_kernels
                                                        # times tessera's), and GB/s at 2^24

Timing: wall clock with `block_until_ready`. JAX has no CUDA events at this level, so the 2^24
figure is 50 calls issued back to back over their total time (192 MiB a call, larger than L2:
no flush needed), beside bench_gpu_kernels' CUDA-event median; a host-bound dispatch would show as
a lower figure, which is what a user of `jax.jit` would see.
"""
import json
import os
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
t_start = time.perf_counter()
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

BLOCK = 1024
IMPL = "JAX Pallas"


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


@jax.jit
def add_fn(x, y):
    # The seed's zeros_like is implicit: pallas_call allocates its output. Blocks as the seed's
    # (1024), smaller for tiny sizes (a Pallas block must be a power of two).
    n = x.shape[0]
    block = min(BLOCK, max(16, 1 << (n - 1).bit_length()))
    spec = pl.BlockSpec((block,), lambda i: (i,))
    return pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct((n,), jnp.float32),
                          grid=(pl.cdiv(n, block),), in_specs=[spec, spec], out_specs=spec)(x, y)


def emit(kernel, size, **fig):
    print(json.dumps({"kernel": kernel, "size": size, "impl": IMPL, **fig}), flush=True)


def inputs(n, seed):
    r = np.random.default_rng(seed)
    return (jax.device_put(r.standard_normal(n, dtype=np.float32)),
            jax.device_put(r.standard_normal(n, dtype=np.float32)))


def check(out, x, y):
    assert np.array_equal(np.asarray(out), np.asarray(x) + np.asarray(y)), "wrong result"


def first():
    cache = sys.argv[2] if len(sys.argv) > 2 else "cold"
    path = os.environ.get("PALLAS_CACHE_DIR")
    if path:
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    t = time.perf_counter()
    x, y = inputs(4, 0)
    x5, y5 = inputs(5, 1)
    x.block_until_ready()
    x5.block_until_ready()
    ctx_us = (time.perf_counter() - t) * 1e6
    t0 = time.perf_counter()
    out = add_fn(x, y).block_until_ready()
    first_us = (time.perf_counter() - t0) * 1e6
    check(out, x, y)
    t1 = time.perf_counter()
    out5 = add_fn(x5, y5).block_until_ready()
    recompile_us = (time.perf_counter() - t1) * 1e6
    check(out5, x5, y5)
    for kernel, size, us in (("add_fn compiled, first call", "n=4", first_us),
                             ("add_fn compiled, recompile to a dynamic size", "n=5 after n=4",
                              recompile_us),
                             ("CUDA context and inputs (not in the first call)", "-", ctx_us)):
        emit(f"{kernel}, {cache} caches", size, us=round(us, 1),
             import_s=round(t - t_start, 2))


def compiled():
    x, y = inputs(4, 2)
    check(add_fn(x, y), x, y)
    for _ in range(100):
        add_fn(x, y)
    add_fn(x, y).block_until_ready()
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(2000):
            out = add_fn(x, y)
        t1 = time.perf_counter()
        out.block_until_ready()
        emit("add_fn compiled, host time per call", "n=4", us=round((t1 - t0) / 2000 * 1e6, 2))
    n = 1 << 24
    x, y = inputs(n, 3)
    check(add_fn(x, y), x, y)
    for _ in range(3):
        add_fn(x, y).block_until_ready()
        t0 = time.perf_counter()
        for _ in range(50):
            out = add_fn(x, y)
        out.block_until_ready()
        s = (time.perf_counter() - t0) / 50
        emit("add_fn compiled f32", "2^24", us=round(s * 1e6, 1), gbs=round(12 * n / s / 1e9, 1))


if __name__ == "__main__":
    {"first": first, "compiled": compiled}[sys.argv[1]]()
