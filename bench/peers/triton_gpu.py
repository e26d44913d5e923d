"""Triton and PyTorch on the GPU workloads of bench/gpu_kernels.cpp, timed the same way: CUDA
events around each run, a 256 MiB buffer rewritten (untimed) before each run so the inputs are
not in L2, 5 warm-up runs, the median of 50. The Triton kernels are the ones of Triton's
tutorials (01 vector add, 02 fused softmax one row per program, 05 layer norm forward), with the
same block sizes and num_warps as tessera's side; every result is checked against PyTorch first.
Prints one JSON object per line ({"kernel", "size", "impl", "us", "gbs"}); bench/gpu_table.py
joins them with tessera's lines into the ratio table. scripts/gpu-check.sh runs it.

    python3 bench/peers/triton_gpu.py kernels       # the memory-bound kernels
    python3 bench/peers/triton_gpu.py compiled      # the seed's add_fn (and + relu) under
                                                    # torch.compile; host time per call at n = 4;
                                                    # softmax and layer_norm, compiled and eager
    python3 bench/peers/triton_gpu.py compiled-first cold|warm  # add_fn's first compiled call
                                                    # and its recompile to a dynamic size
    python3 bench/peers/triton_gpu.py autotune cold|warm  # triton.autotune's first tuned launch
                                                    # (the seed's 4 add configs; 8 softmax ones)
    python3 bench/peers/triton_gpu.py launch        # host time of one hot launch (n = 1024)
    python3 bench/peers/triton_gpu.py attention     # issue 16's attention forward (bf16,
                                                    # 4 x 32 x 4096 x {64, 128}): Triton's
                                                    # tutorial kernel, SDPA cuDNN and flash
    python3 bench/peers/triton_gpu.py first-launch cold|warm  # first launch of a new kernel in
                                                    # this process, to its result (the cache as
                                                    # TRITON_CACHE_DIR has it)
"""
import json
import sys
import time
import warnings

warnings.filterwarnings("ignore")
t_start = time.perf_counter()
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(output_ptr + offsets, x + y, mask=mask)


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                   BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    row = tl.load(input_ptr + row_idx * input_row_stride + col_offsets, mask=mask,
                  other=-float("inf"))
    row_minus_max = row - tl.max(row, axis=0)
    numerator = tl.exp(row_minus_max)
    denominator = tl.sum(numerator, axis=0)
    tl.store(output_ptr + row_idx * output_row_stride + col_offsets, numerator / denominator,
             mask=mask)


@triton.jit
def layer_norm_fwd(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        tl.store(Y + cols, y, mask=mask)


def softmax_warps(block):
    """num_warps as bench/gpu_kernels.cpp picks it for both sides."""
    return 16 if block >= 4096 else 8 if block >= 2048 else 4


def median_us(fn, flush):
    for _ in range(5):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(50):
        flush.fill_(float(i))  # evicts the inputs from L2 (untimed)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(1000.0 * start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def emit(kernel, size, impl, us, nbytes):
    print(json.dumps({"kernel": kernel, "size": size, "impl": impl, "us": round(us, 3),
                      "gbs": round(nbytes / us / 1e3, 1)}), flush=True)


def kernels():
    dev = torch.device("cuda")
    flush = torch.empty(64 << 20, device=dev)
    for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        for p in ((20, 24, 28) if dtype == torch.float32 else (24, 28)):
            n = 1 << p
            x = torch.randn(n, device=dev, dtype=dtype)
            y = torch.randn_like(x)
            out = torch.empty_like(x)
            grid = (triton.cdiv(n, 1024),)
            add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024)
            assert torch.equal(out, x + y)
            nbytes = 3 * x.element_size() * n
            emit(f"add {name}", f"2^{p}", "triton",
                 median_us(lambda: add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024), flush), nbytes)
            emit(f"add {name}", f"2^{p}", "torch",
                 median_us(lambda: torch.add(x, y, out=out), flush), nbytes)
    for cols in (1024, 4096, 16384):
        rows = 4096
        x = torch.randn(rows, cols, device=dev)
        out = torch.empty_like(x)
        warps = softmax_warps(cols)

        def tri():
            softmax_kernel[(rows,)](out, x, x.stride(0), out.stride(0), cols, BLOCK_SIZE=cols,
                                    num_warps=warps)

        tri()
        assert torch.allclose(out, torch.softmax(x, -1), atol=1e-6, rtol=1e-5)
        nbytes = 2 * 4 * rows * cols
        tri_us = median_us(tri, flush)
        emit("softmax f32", f"4096x{cols}", "triton", tri_us, nbytes)
        # Triton's tl.exp is ex2.approx: the kernel beside tessera's tl::fast_exp row too.
        emit("softmax f32 fast_exp", f"4096x{cols}", "triton", tri_us, nbytes)
        emit("softmax f32", f"4096x{cols}", "torch",
             median_us(lambda: torch.softmax(x, -1), flush), nbytes)
    M, N = 16384, 4096
    x = torch.randn(M, N, device=dev, dtype=torch.bfloat16)
    w = torch.rand(N, device=dev, dtype=torch.bfloat16)
    b = torch.randn(N, device=dev, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    mean = torch.empty(M, device=dev)
    rstd = torch.empty(M, device=dev)
    block = min(65536 // x.element_size(), triton.next_power_of_2(N))
    warps = min(max(block // 256, 1), 8)

    def ln():
        layer_norm_fwd[(M,)](x, y, w, b, mean, rstd, x.stride(0), N, 1e-5, BLOCK_SIZE=block,
                             num_warps=warps)

    ln()
    ref = torch.nn.functional.layer_norm(x.float(), (N,), w.float(), b.float(), 1e-5)
    assert torch.allclose(y.float(), ref, atol=3e-2, rtol=2e-2)
    nbytes = 2 * 2 * M * N
    emit("layer norm bf16", "16384x4096", "triton", median_us(ln, flush), nbytes)
    emit("layer norm bf16", "16384x4096", "torch",
         median_us(lambda: torch.nn.functional.layer_norm(x, (N,), w, b, 1e-5), flush), nbytes)
    # The built-in reductions of a training step, beside bench_gpu_kernels' rows.
    for name, size, shape, dtype, dims in (
            ("sum dim 0 bf16", "8192x3072", (8192, 3072), torch.bfloat16, (0,)),
            ("sum dim 0 bf16", "8192x768", (8192, 768), torch.bfloat16, (0,)),
            ("sum dim 1 bf16", "8192x3072", (8192, 3072), torch.bfloat16, (1,)),
            ("sum all f32", "2^24", (1 << 24,), torch.float32, ())):
        x = torch.randn(shape, device=dev, dtype=dtype)
        f = (lambda x=x, dims=dims: x.sum(dims)) if dims else (lambda x=x: x.sum())
        emit(name, size, "torch", median_us(f, flush), x.numel() * x.element_size())


def autotune():
    """triton.autotune's first tuned launch in this process, to its result, beside
    bench_gpu_kernels autotune: the seed's four add configs (n = 4) and a softmax looped over its
    row in blocks, tuned over eight block sizes (1024 x 4096 float32, key n_cols). Cold: empty
    TRITON_CACHE_DIR; warm: a new process with it filled, Triton's disk cache of autotuning
    results on (cache_results, where this Triton has it)."""
    import inspect
    cache = sys.argv[2] if len(sys.argv) > 2 else "cold"
    kw = {"cache_results": True} if "cache_results" in inspect.signature(triton.autotune).parameters else {}
    dev = torch.device("cuda")
    x, y = torch.randn(4, device=dev), torch.randn(4, device=dev)
    out = torch.empty_like(x)
    a = torch.randn(1024, 4096, device=dev)
    torch.cuda.synchronize()

    @triton.autotune(configs=[triton.Config({"BLOCK_SIZE": 4}, num_warps=8, num_stages=3),
                              triton.Config({"BLOCK_SIZE": 4}, num_warps=4, num_stages=4),
                              triton.Config({"BLOCK_SIZE": 2}, num_warps=8, num_stages=3),
                              triton.Config({"BLOCK_SIZE": 2}, num_warps=4, num_stages=4)],
                     key=[], **kw)
    @triton.jit
    def add_kernel_autotuned(in_ptr0, in_ptr1, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        tl.store(out_ptr + offsets, tl.load(in_ptr0 + offsets, mask=mask) +
                 tl.load(in_ptr1 + offsets, mask=mask), mask=mask)

    @triton.autotune(configs=[triton.Config({"BLOCK_SIZE": b}) for b in
                              (32, 64, 128, 256, 512, 1024, 2048, 4096)], key=["n_cols"], **kw)
    @triton.jit
    def softmax_looped(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK_SIZE: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK_SIZE)
        in_row = in_ptr + row * in_stride
        m = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)
        for start in range(0, n_cols, BLOCK_SIZE):
            offs = start + cols
            m = tl.maximum(m, tl.load(in_row + offs, mask=offs < n_cols, other=float("-inf")))
        row_max = tl.max(m, 0)
        d = tl.zeros([BLOCK_SIZE], tl.float32)
        for start in range(0, n_cols, BLOCK_SIZE):
            offs = start + cols
            d += tl.exp(tl.load(in_row + offs, mask=offs < n_cols, other=float("-inf")) - row_max)
        inv = 1.0 / tl.sum(d, 0)
        for start in range(0, n_cols, BLOCK_SIZE):
            offs = start + cols
            mask = offs < n_cols
            e = tl.exp(tl.load(in_row + offs, mask=mask, other=float("-inf")) - row_max)
            tl.store(out_ptr + row * out_stride + offs, e * inv, mask=mask)

    t0 = time.perf_counter()
    add_kernel_autotuned[lambda m: (triton.cdiv(4, m["BLOCK_SIZE"]),)](x, y, out, 4)
    torch.cuda.synchronize()
    add_us = (time.perf_counter() - t0) * 1e6
    assert torch.equal(out, x + y)
    s = torch.empty_like(a)
    t1 = time.perf_counter()
    softmax_looped[(a.shape[0],)](s, a, a.stride(0), s.stride(0), a.shape[1])
    torch.cuda.synchronize()
    softmax_us = (time.perf_counter() - t1) * 1e6
    torch.testing.assert_close(s, torch.softmax(a, 1))
    for size, us in (("seed add, 4 configs, n=4", add_us),
                     ("softmax, 8 configs, 1024x4096 f32", softmax_us)):
        print(json.dumps({"kernel": f"autotune, first tuned launch, {cache} cache", "size": size,
                          "impl": "triton", "us": round(us, 1), "cache_results": bool(kw)}),
              flush=True)


def seed_add_fn(x, y):
    """The seed's add_fn: a zeros_like, then the user kernel over it."""
    output = torch.zeros_like(x)
    n = output.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, output, n, BLOCK_SIZE=1024)
    return output


def compiled_first():
    """torch.compile's first call of the seed's add_fn in this process (n = 4: Dynamo, Inductor,
    Triton's compile of the user kernel, with the caches TORCHINDUCTOR_CACHE_DIR and
    TRITON_CACHE_DIR name, cold or warm), then the call at n = 5 that recompiles it with a dynamic
    size; the CUDA context's creation apart (beside bench_gpu_kernels compiled-first)."""
    cache = sys.argv[2] if len(sys.argv) > 2 else "cold"
    t = time.perf_counter()
    dev = torch.device("cuda")
    x, y = torch.randn(4, device=dev), torch.randn(4, device=dev)
    x5, y5 = torch.randn(5, device=dev), torch.randn(5, device=dev)
    torch.cuda.synchronize()
    ctx_us = (time.perf_counter() - t) * 1e6
    t0 = time.perf_counter()
    c = torch.compile(seed_add_fn, fullgraph=True)
    out = c(x, y)
    torch.cuda.synchronize()
    first_us = (time.perf_counter() - t0) * 1e6
    assert torch.equal(out, x + y)
    t1 = time.perf_counter()
    out5 = c(x5, y5)
    torch.cuda.synchronize()
    recompile_us = (time.perf_counter() - t1) * 1e6
    assert torch.equal(out5, x5 + y5)
    for kernel, size, us in (("add_fn compiled, first call", "n=4", first_us),
                             ("add_fn compiled, recompile to a dynamic size", "n=5 after n=4",
                              recompile_us),
                             ("CUDA context and inputs (not in the first call)", "-", ctx_us)):
        print(json.dumps({"kernel": f"{kernel}, {cache} caches", "size": size,
                          "impl": "torch.compile", "us": round(us, 1),
                          "import_s": round(t - t_start, 2)}), flush=True)


def compiled():
    """The seed's add_fn (zeros_like, then the Triton kernel) and add_fn followed by a relu under
    torch.compile (Inductor's defaults: no user-kernel epilogue fusion), beside tessera::compile's
    rows of bench/gpu_kernels.cpp; and host time per call at n = 4."""
    dev = torch.device("cuda")
    flush = torch.empty(64 << 20, device=dev)

    add_fn = seed_add_fn

    def add_relu(x, y):
        return add_fn(x, y).relu()

    for name, fn, ref in (("add_fn compiled f32", add_fn, lambda x, y: x + y),
                          ("add_fn+relu compiled f32", add_relu, lambda x, y: (x + y).relu())):
        c = torch.compile(fn, fullgraph=True)
        n = 1 << 24
        x = torch.randn(n, device=dev)
        y = torch.randn_like(x)
        assert torch.equal(c(x, y), ref(x, y))
        emit(name, "2^24", "torch.compile", median_us(lambda: c(x, y), flush), 12 * n)
    # Issue 17's row functions, as bench/gpu_kernels.cpp's compiled_row_kernels writes them.
    def softmax_ops(x):
        e = torch.exp(x - torch.amax(x, 1, keepdim=True))
        return e / e.sum(1, keepdim=True)

    for cols in (1024, 4096):
        x = torch.randn(4096, cols, device=dev)
        want = torch.softmax(x, 1)
        for name, fn in (("softmax compiled f32", lambda t: torch.softmax(t, 1)),
                         ("softmax from ops compiled f32", softmax_ops)):
            for impl, f in (("torch.compile", torch.compile(fn, fullgraph=True)),
                            ("torch eager", fn)):
                torch.testing.assert_close(f(x), want)
                emit(name, f"4096x{cols}", impl, median_us(lambda: f(x), flush), 8 * x.numel())
    m, n = 16384, 4096
    x = torch.randn(m, n, device=dev, dtype=torch.bfloat16)
    w = torch.rand(n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, device=dev, dtype=torch.bfloat16)

    def ln(x, w, b):
        return torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5)

    for impl, f in (("torch.compile", torch.compile(ln, fullgraph=True)), ("torch eager", ln)):
        emit("layer_norm compiled bf16", f"{m}x{n}", impl, median_us(lambda: f(x, w, b), flush),
             4 * m * n)
    c = torch.compile(add_fn, fullgraph=True)
    x = torch.randn(4, device=dev)
    y = torch.randn_like(x)
    for _ in range(100):
        c(x, y)
    torch.cuda.synchronize()
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(2000):
            c(x, y)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        print(json.dumps({"kernel": "add_fn compiled, host time per call", "size": "n=4",
                          "impl": "torch.compile", "us": round((t1 - t0) / 2000 * 1e6, 2)}),
              flush=True)


def launch():
    dev = torch.device("cuda")
    x = torch.randn(1024, device=dev)
    y = torch.randn_like(x)
    out = torch.empty_like(x)
    for _ in range(100):
        add_kernel[(1,)](x, y, out, 1024, BLOCK_SIZE=1024)
    torch.cuda.synchronize()
    reps = 3
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(2000):
            add_kernel[(1,)](x, y, out, 1024, BLOCK_SIZE=1024)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        print(json.dumps({"kernel": "hot launch host time", "size": "n=1024", "impl": "triton",
                          "us": round((t1 - t0) / 2000 * 1e6, 2)}), flush=True)


def first_launch():
    dev = torch.device("cuda")
    x = torch.randn(1 << 20, device=dev)
    y = torch.randn_like(x)
    out = torch.empty_like(x)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    add_kernel[(1024,)](x, y, out, 1 << 20, BLOCK_SIZE=1024)
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3
    assert torch.equal(out, x + y)
    cache = sys.argv[2] if len(sys.argv) > 2 else "cold"
    print(json.dumps({"kernel": "first launch", "size": f"add 2^20, {cache} cache", "impl": "triton",
                      "us": round(ms * 1e3, 1), "import_s": round(t0 - t_start, 2)}),
          flush=True)


def training():
    """Issue 17's MLP block (LayerNorm, Linear, GELU, Linear + residual; bf16, 8 x 1024 tokens x
    768, hidden 3072): forward, and forward + backward of the six parameters' gradients, in
    PyTorch eager and under torch.compile, beside bench_gpu_kernels training; and torch.compile's
    first step (trace, compile, run)."""
    import torch.nn.functional as F
    dev = torch.device("cuda")
    flush = torch.empty(64 << 20, device=dev)
    T, D, H = 8 * 1024, 768, 3072
    bf = dict(device=dev, dtype=torch.bfloat16)
    x, up = torch.randn(T, D, **bf), torch.randn(T, D, **bf)
    lw = torch.randn(D, **bf).requires_grad_()
    lb = torch.randn(D, **bf).requires_grad_()
    w1 = (torch.randn(D, H, **bf) * 0.03).requires_grad_()
    b1 = torch.zeros(H, **bf).requires_grad_()
    w2 = (torch.randn(H, D, **bf) * 0.03).requires_grad_()
    b2 = torch.zeros(D, **bf).requires_grad_()
    params = [lw, lb, w1, b1, w2, b2]

    def mlp(t):
        h = F.layer_norm(t, [D], lw, lb, 1e-5) @ w1 + b1
        return F.gelu(h, approximate="tanh") @ w2 + b2 + t

    compiled = torch.compile(mlp, fullgraph=True)
    t0 = time.perf_counter()
    torch.autograd.grad(compiled(x), params, up)
    torch.cuda.synchronize()
    first = time.perf_counter() - t0
    size = "8x1024x768"
    for impl, f in (("torch eager", mlp), ("torch.compile", compiled)):
        def fwd(f=f):
            with torch.no_grad():
                return f(x)

        for kernel, run in (("mlp block bf16 forward", fwd),
                            ("mlp block bf16 forward+backward",
                             lambda f=f: torch.autograd.grad(f(x), params, up))):
            print(json.dumps({"kernel": kernel, "size": size, "impl": impl,
                              "us": round(median_us(run, flush), 1)}), flush=True)
    print(json.dumps({"kernel": "mlp block first compiled step (trace, compile, run)",
                      "size": size, "impl": "torch.compile", "us": round(first * 1e6)}),
          flush=True)


@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
              BK: tl.constexpr, TB: tl.constexpr = False):
    # bench_gpu_kernels' mm_kernel: Triton's tutorial matmul without grouping or masks (TB: b
    # stored [N, K], c = a @ b.T).
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
    if TB:
        b_ptrs = b_ptr + offs_n[None, :] * K + offs_k[:, None]
    else:
        b_ptrs = b_ptr + offs_k[:, None] * N + offs_n[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BK)):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BK
        if TB:
            b_ptrs += BK
        else:
            b_ptrs += BK * N
    c_ptrs = c_ptr + offs_m[:, None] * N + offs_n[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty))


def matmul():
    """cuBLAS (PyTorch's a @ b) and Triton (the same kernel and configs as bench_gpu_kernels
    matmul) at 4096^3 and 8192^3: fp16, bf16, and float32 with TF32 tensor cores allowed (tessera's float32
    dot is tf32 by default, as Triton's)."""
    dev = torch.device("cuda")
    flush = torch.empty(64 << 20, device=dev)
    torch.backends.cuda.matmul.allow_tf32 = True
    configs = ((128, 128, 32, 8, 3), (128, 128, 32, 8, 1), (128, 128, 64, 4, 4),
               (128, 256, 64, 8, 3))
    # 4096^3 in every type and config; 8192^3 in bfloat16 at the Hopper configs (as tessera's)
    # and bfloat16 x @ w.T (b stored [N, K]) at the Hopper configs
    rows = [(4096, torch.float16, "float16", configs, False),
            (4096, torch.bfloat16, "bfloat16", configs, False),
            (4096, torch.float32, "float32", configs, False),
            (8192, torch.bfloat16, "bfloat16", configs[2:], False),
            (4096, torch.bfloat16, "bfloat16 x @ w.T", configs[2:], True),
            (8192, torch.bfloat16, "bfloat16 x @ w.T", configs[2:], True)]
    for n, dtype, name, configs, tb in rows:
        a = torch.randn(n, n, device=dev, dtype=dtype)
        b = torch.randn(n, n, device=dev, dtype=dtype)
        us = median_us((lambda: a @ b.t()) if tb else (lambda: a @ b), flush)
        print(json.dumps({"kernel": f"matmul {name}", "size": f"{n}^3", "impl": "cublas",
                          "us": round(us, 1), "tflops": round(2 * n ** 3 / us / 1e6, 1)}),
              flush=True)
        c = torch.empty(n, n, device=dev, dtype=dtype)
        for bm, bn, bk, warps, stages in configs:
            grid = (n // bm, n // bn)

            def run():
                mm_kernel[grid](a, b, c, n, n, n, BM=bm, BN=bn, BK=bk, TB=tb, num_warps=warps,
                                num_stages=stages)
            try:
                us = median_us(run, flush)
            except Exception as e:  # (a config that does not fit: said, not fatal)
                print(f"triton matmul {name} {bm}x{bn}x{bk}: {type(e).__name__}", flush=True)
                continue
            print(json.dumps({"kernel": f"matmul {name}", "size": f"{n}^3",
                              "impl": f"triton {bm}x{bn}x{bk} w{warps} s{stages}",
                              "us": round(us, 1), "tflops": round(2 * n ** 3 / us / 1e6, 1)}),
                  flush=True)


@triton.jit
def attn_fwd_kernel(Q, K, V, sm_scale, L, Out, stride_qh, stride_qm, stride_kh, stride_kn,
                    stride_vh, stride_vn, stride_oh, stride_om, N_CTX, BLOCK_M: tl.constexpr,
                    BLOCK_DMODEL: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr):
    # Triton's tutorial 06 forward in its pointer-based form, line for line the kernel of
    # examples/attention.h (bench_gpu_kernels attention).
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_DMODEL)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DMODEL], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    q = tl.load(Q + off_hz * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :])
    q = (q * qk_scale).to(Q.dtype.element_ty)
    hi = (start_m + 1) * BLOCK_M if IS_CAUSAL else N_CTX
    for start_n in range(0, hi, BLOCK_N):
        k = tl.load(K + off_hz * stride_kh + (start_n + offs_n)[None, :] * stride_kn +
                    offs_d[:, None])
        v = tl.load(V + off_hz * stride_vh + (start_n + offs_n)[:, None] * stride_vn +
                    offs_d[None, :])
        qk = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        if IS_CAUSAL:
            qk = tl.where(offs_m[:, None] >= (start_n + offs_n[None, :]), qk, float("-inf"))
        qk += tl.dot(q, k)
        m_i_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.math.exp2(m_i - m_i_new)
        p = tl.math.exp2(qk - m_i_new[:, None])
        acc *= alpha[:, None]
        acc += tl.dot(p.to(V.dtype.element_ty), v)
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_i_new
    out = acc / l_i[:, None]
    tl.store(L + off_hz * N_CTX + offs_m, m_i + tl.math.log2(l_i))
    tl.store(Out + off_hz * stride_oh + offs_m[:, None] * stride_om + offs_d[None, :],
             out.to(Out.dtype.element_ty))


def attention():
    """Issue 16's attention forward beside bench_gpu_kernels attention: bf16, 4 x 32 heads of
    4096 x D (D 64 and 128), causal and not. Triton: the tutorial kernel above, autotuned over the
    same configs as tessera's (BLOCK_M {64, 128} x BLOCK_N {32, 64, 128} x {4, 8} warps, 3
    stages; configs that do not fit are skipped by triton.autotune's failure handling: timed
    one by one here); PyTorch's SDPA with its cuDNN and flash backends. Each checked against
    SDPA's math backend on the first head."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    dev = torch.device("cuda")
    flush = torch.empty(64 << 20, device=dev)
    Z, H, N = 4, 32, 4096
    configs = [(bm, bn, w) for bm in (64, 128) for bn in (32, 64, 128) for w in (4, 8)]
    for D in (64, 128):
        q = (torch.randn(Z, H, N, D, device=dev) * 0.5).to(torch.bfloat16)
        k = (torch.randn(Z, H, N, D, device=dev) * 0.5).to(torch.bfloat16)
        v = torch.randn(Z, H, N, D, device=dev).to(torch.bfloat16)
        sm_scale = 1.0 / D ** 0.5
        for causal in (False, True):
            what = f"attention fwd bf16 D={D}" + (" causal" if causal else "")
            flops = 4.0 * Z * H * N * N * D * (0.5 if causal else 1.0)
            with sdpa_kernel(SDPBackend.MATH):
                want = torch.nn.functional.scaled_dot_product_attention(
                    q[:1, :1].float(), k[:1, :1].float(), v[:1, :1].float(), is_causal=causal)

            def row(impl, us, out):
                err = (out[:1, :1].float() - want).abs().max().item()
                if not err <= 0.05:
                    print(f"{impl} {what}: error {err}", flush=True)
                    return
                print(json.dumps({"kernel": what, "size": "4x32x4096", "impl": impl,
                                  "us": round(us, 1), "tflops": round(flops / us / 1e6, 1)}),
                      flush=True)
            for name, backend in (("sdpa cudnn", SDPBackend.CUDNN_ATTENTION),
                                  ("sdpa flash", SDPBackend.FLASH_ATTENTION)):
                try:
                    with sdpa_kernel(backend):
                        def run():
                            return torch.nn.functional.scaled_dot_product_attention(
                                q, k, v, is_causal=causal)
                        out = run()
                        us = median_us(run, flush)
                    row(name, us, out)
                except Exception as e:  # (a backend this build lacks: said, not fatal)
                    print(f"{name} {what}: {type(e).__name__}: {str(e)[:120]}", flush=True)
            qh, kh, vh = (t.view(Z * H, N, D) for t in (q, k, v))
            o = torch.empty_like(qh)
            lse = torch.empty(Z * H, N, device=dev)
            best = None
            for bm, bn, w in configs:
                def run():
                    attn_fwd_kernel[(triton.cdiv(N, bm), Z * H)](
                        qh, kh, vh, sm_scale, lse, o, qh.stride(0), qh.stride(1), kh.stride(0),
                        kh.stride(1), vh.stride(0), vh.stride(1), o.stride(0), o.stride(1), N,
                        BLOCK_M=bm, BLOCK_DMODEL=D, BLOCK_N=bn, IS_CAUSAL=causal,
                        num_warps=w, num_stages=3)
                try:
                    run()
                    us = median_us(run, flush)
                except Exception as e:  # (a config that does not fit: said, not fatal)
                    print(f"triton attention {what} {bm}x{bn} w{w}: {type(e).__name__}",
                          flush=True)
                    continue
                if best is None or us < best[0]:
                    best = (us, bm, bn, w)
            if best is not None:
                us, bm, bn, w = best
                attn_fwd_kernel[(triton.cdiv(N, bm), Z * H)](
                    qh, kh, vh, sm_scale, lse, o, qh.stride(0), qh.stride(1), kh.stride(0),
                    kh.stride(1), vh.stride(0), vh.stride(1), o.stride(0), o.stride(1), N,
                    BLOCK_M=bm, BLOCK_DMODEL=D, BLOCK_N=bn, IS_CAUSAL=causal, num_warps=w,
                    num_stages=3)
                row("triton", us, o.view(Z, H, N, D))


if __name__ == "__main__":
    {"kernels": kernels, "compiled": compiled, "launch": launch, "matmul": matmul,
     "attention": attention,
     "training": training, "first-launch": first_launch,
     "compiled-first": compiled_first, "autotune": autotune}[sys.argv[1]]()
