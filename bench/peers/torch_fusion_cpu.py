"""PyTorch eager and torch.compile (Inductor's C++ backend) on the functions of issue 17's fusion
benchmarks, on CPU tensors, beside `bench_compile_cpu`'s rows of the same names:

    BiasReluResidual    relu((x + bias) * 0.5) + residual
    BiasGeluResidual    gelu((x + bias) * 0.5, approximate="tanh") + residual
    SoftmaxOps          e = exp(x - amax(x, -1)); e / sum(e, -1)
    LayerNormOps        mean, centre, variance, rsqrt, weight, bias (nine ops)
    SoftmaxOperator     softmax(x, -1)
    LayerNormOperator   layer_norm(x, [1024], w, b)
    PointwiseTrain      forward and backward of relu((x + p) * 0.5) + q (grads of x, p)
    LayerNormTrain      forward and backward of gelu(layer_norm(x, w, b), tanh) (x, w, b)
    SoftmaxTrain        forward and backward of softmax(x * 0.125 + mask) (x)
    MlpTrain            LayerNorm -> Linear -> GELU -> Linear + residual, 2048 x 768, hidden
                        3072: forward and backward of the six parameters' gradients

x is 4096 x 1024 float32. Prints one line per function: name, eager ms, torch.compile ms (medians
of --runs calls after warm-up), and torch.compile's first-call seconds.

    python3 bench/peers/torch_fusion_cpu.py [--threads 2] [--runs 30] [--only MlpTrain]
"""
import argparse
import statistics
import time
import warnings

warnings.filterwarnings("ignore")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--only", default="", help="run only the functions whose names contain this")
    args = ap.parse_args()
    import torch  # noqa: E402
    import torch.nn.functional as F  # noqa: E402

    torch.set_num_threads(args.threads)
    x = torch.randn(4096, 1024)
    bias, w, b = torch.randn(1024), torch.randn(1024), torch.randn(1024)
    r = torch.randn(4096, 1024)

    def bias_relu(x, bias, r):
        return torch.relu((x + bias) * 0.5) + r

    def bias_gelu(x, bias, r):
        return F.gelu((x + bias) * 0.5, approximate="tanh") + r

    def softmax_ops(x):
        e = torch.exp(x - x.amax(-1, keepdim=True))
        return e / e.sum(-1, keepdim=True)

    def layer_norm_ops(x, w, b):
        mean = x.mean(-1, keepdim=True)
        xc = x - mean
        var = (xc * xc).mean(-1, keepdim=True)
        return xc * torch.rsqrt(var + 1e-5) * w + b

    def softmax_op(x):
        return torch.softmax(x, -1)

    def layer_norm_op(x, w, b):
        return F.layer_norm(x, [1024], w, b, 1e-5)

    cases = [
        ("BiasReluResidual", bias_relu, (x, bias, r)),
        ("BiasGeluResidual", bias_gelu, (x, bias, r)),
        ("SoftmaxOps", softmax_ops, (x,)),
        ("LayerNormOps", layer_norm_ops, (x, w, b)),
        ("SoftmaxOperator", softmax_op, (x,)),
        ("LayerNormOperator", layer_norm_op, (x, w, b)),
    ]

    def median_ms(fn, a):
        for _ in range(3):
            fn(*a)
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            fn(*a)
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)

    for name, fn, a in cases:
        if args.only not in name:
            continue
        compiled = torch.compile(fn, fullgraph=True)
        t0 = time.perf_counter()
        out = compiled(*a)
        first = time.perf_counter() - t0
        assert torch.allclose(out, fn(*a), rtol=1e-4, atol=1e-5), name
        print(f"{name} {median_ms(fn, a):.3f} {median_ms(compiled, a):.3f} {first:.2f}", flush=True)

    # Training under compile: forward and backward (torch.autograd.grad with an upstream
    # gradient) of bench_compile_cpu's BM_*Train rows.
    up = torch.randn(4096, 1024)
    mask = torch.randn(4096, 1024)
    train = [
        ("PointwiseTrain", lambda x, p, q: torch.relu((x + p) * 0.5) + q,
         (torch.randn(4096, 1024, requires_grad=True), torch.randn(1024, requires_grad=True), r)),
        ("LayerNormTrain",
         lambda x, p, q: F.gelu(F.layer_norm(x, [1024], p, q, 1e-5), approximate="tanh"),
         (torch.randn(4096, 1024, requires_grad=True), torch.randn(1024, requires_grad=True),
          torch.randn(1024, requires_grad=True))),
        ("SoftmaxTrain", lambda x, p, q: torch.softmax(x * 0.125 + q, -1),
         (torch.randn(4096, 1024, requires_grad=True), None, mask)),
    ]
    T, D, H = 2048, 768, 3072
    lw, lb = torch.randn(D, requires_grad=True), torch.randn(D, requires_grad=True)
    w1 = (torch.randn(D, H) * 0.03).requires_grad_()
    b1 = torch.zeros(H, requires_grad=True)
    w2 = (torch.randn(H, D) * 0.03).requires_grad_()
    b2 = torch.zeros(D, requires_grad=True)

    def mlp(t, p, q):
        h = F.layer_norm(t, [D], lw, lb, 1e-5) @ w1 + b1
        return F.gelu(h, approximate="tanh") @ w2 + b2 + t

    xm = torch.randn(T, D)
    train.append(("MlpTrain", mlp, (xm, None, None)))
    for name, fn, a in train:
        if args.only not in name:
            continue
        wrt = [t for t in a if t is not None and t.requires_grad]
        if name == "MlpTrain":
            wrt = [lw, lb, w1, b1, w2, b2]
            up_ = torch.randn(T, D)
        else:
            up_ = up

        def step(f, a=a, wrt=wrt, up_=up_):
            return torch.autograd.grad(f(*a), wrt, up_)

        compiled = torch.compile(fn, fullgraph=True)
        t0 = time.perf_counter()
        got = step(compiled)
        first = time.perf_counter() - t0
        for g, w in zip(got, step(fn)):
            assert torch.allclose(g, w, rtol=1e-3, atol=1e-2), name
        print(f"{name} {median_ms(lambda: step(fn), ()):.3f} "
              f"{median_ms(lambda: step(compiled), ()):.3f} {first:.2f}", flush=True)


if __name__ == "__main__":
    main()
