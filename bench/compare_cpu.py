#!/usr/bin/env python3
"""tessera's CPU kernels beside PyTorch (eager and torch.compile) and Halide 14, in one run.

Runs each side in turn for several rounds, so that the shared machine's slow phases (its memory
bandwidth swings between about 30 and 60 GB/s over minutes) fall on all of them alike, keeps each
side's best round per workload (throughput) or median (latency), and prints a Markdown table of
throughputs and ratios against the issue's targets, then the latency table (cold compile,
warm-cache first result, hot launch).

    python3 bench/compare_cpu.py [--build build] [--python .venv-bench/bin/python] [--rounds 3]
                                 [--charts docs/charts]

Each table is also drawn as an SVG chart in --charts (default docs/charts, linked from
docs/benchmarks.md; `--charts ''` draws none) by `tessera chart`, perf_report's renderer.

`make bench-compare` runs it. PyTorch comes from pip (see docs/benchmarks.md); Halide from
Debian's libhalide14-0-dev (bench_halide_cpu is built when CMake finds it). A missing peer is
reported as such, not skipped silently.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# workload -> (tessera benchmark, Halide benchmark, torch keys, targets)
WORKLOADS = [
    ("add f32 2^24", "BM_AddKernel/4096/real_time", "BM_HalideAdd/real_time", "add",
     "≥0.95x best peer"),
    ("softmax 4096x1024", "BM_SoftmaxKernel/real_time", "BM_HalideSoftmax/real_time", "softmax",
     "≥1.0x torch, ≥0.9x Halide"),
    ("layer norm 4096x4096 (the example's kernel: Triton's tutorial 05)", "BM_LayerNormKernel/real_time",
     "BM_HalideLayerNorm/real_time", "layer_norm", "≥1.0x torch, ≥0.9x Halide"),
    ("layer norm 4096x4096 (one tile per row)", "BM_LayerNormOneBlockKernel/real_time",
     "BM_HalideLayerNorm/real_time", "layer_norm", "—"),
]


def chart(args, name, header, rows, title, ylabel, log_y=False):
    """Writes <charts>/<name>.csv (one column per side, empty where a side did not run) and draws
    <charts>/<name>.svg with `tessera chart`."""
    if not args.charts:
        return
    os.makedirs(args.charts, exist_ok=True)
    csv = os.path.join(args.charts, name + ".csv")
    with open(csv, "w") as f:
        f.write(",".join(header) + "\n")
        for label, values in rows:
            f.write(",".join([label.replace(",", ";")] + ["" if v is None else f"{v:.6g}" for v in values]) + "\n")
    cmd = [os.path.join(args.build, "bin", "tessera"), "chart", csv, os.path.join(args.charts, name + ".svg"),
           "--title", title, "--ylabel", ylabel] + (["--log-y"] if log_y else [])
    subprocess.run(cmd, check=True)
    print(f"chart: {os.path.relpath(os.path.join(args.charts, name + '.svg'), ROOT)}", file=sys.stderr)


def gbench(exe, bench_filter, min_time):
    out = subprocess.run([exe, f"--benchmark_filter={bench_filter}", f"--benchmark_min_time={min_time}",
                          "--benchmark_format=json"], check=True, capture_output=True, text=True).stdout
    res = {}
    for b in json.loads(out)["benchmarks"]:
        res[b["name"]] = b.get("bytes_per_second", 0) / 1e9 if "bytes_per_second" in b else b["real_time"]
    return res


def first_line_ms(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return float(out.strip().splitlines()[-1])


def median(xs):
    return statistics.median(xs) if xs else None


def fmt(x, unit=""):
    return "—" if x is None else f"{x:.2f}{unit}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    default_py = os.path.join(ROOT, ".venv-bench", "bin", "python")
    ap.add_argument("--python", default=default_py if os.path.exists(default_py) else sys.executable)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--skip-compile", action="store_true", help="skip the tessera::compile vs torch.compile table")
    ap.add_argument("--only-compile", action="store_true", help="only the tessera::compile vs torch.compile table")
    ap.add_argument("--charts", default=os.path.join(ROOT, "docs", "charts"),
                    help="where to draw the tables as SVG charts ('' for none)")
    args = ap.parse_args()

    tessera = os.path.join(args.build, "bench", "bench_kernels_cpu")
    halide = os.path.join(args.build, "bench", "bench_halide_cpu")
    have_halide = os.path.exists(halide)
    torch_script = os.path.join(ROOT, "bench", "peers", "torch_cpu.py")
    have_torch = subprocess.run([args.python, "-c", "import torch"], capture_output=True).returncode == 0
    if args.only_compile:
        compile_section(args, have_torch)
        return
    notes = []
    if not have_halide:
        notes.append("Halide: not built (install libhalide14-0-dev and re-run CMake)")
    if not have_torch:
        notes.append(f"PyTorch: not importable by {args.python} (pip install torch into .venv-bench)")

    samples = {}

    def add(key, value):
        samples.setdefault(key, []).append(value)

    torch_info = {}
    torch_proc = None
    if have_torch:
        torch_proc = subprocess.Popen([args.python, torch_script, "--serve", "--min-time", str(args.min_time)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      text=True)
        while torch_proc.stdout.readline().strip() != "ready":
            if torch_proc.poll() is not None:
                sys.exit("bench/peers/torch_cpu.py failed to start")
    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds}", file=sys.stderr)
        t = gbench(tessera, "AddKernel/4096|SoftmaxKernel|LayerNormKernel|LayerNormOneBlockKernel|HotLaunch|"
                   "DirectCall", args.min_time)
        for k, v in t.items():
            add(("tessera", k), v)
        if have_halide:
            for k, v in gbench(halide, ".", args.min_time).items():
                add(("halide", k), v)
        if torch_proc:
            torch_proc.stdin.write("go\n")
            torch_proc.stdin.flush()
            res = json.loads(torch_proc.stdout.readline())
            torch_info = {k: res.pop(k) for k in ("torch_version", "threads")}
            for k, v in res.items():
                add(("torch", k), v)

    if torch_proc:
        torch_proc.stdin.write("quit\n")
        torch_proc.stdin.flush()
        torch_proc.wait()

    # Latency: cold compile and warm disk cache in fresh processes, Halide's JIT compile likewise.
    cold, warm, hcomp = [], [], []
    for _ in range(args.rounds):
        cache = tempfile.mkdtemp(prefix="tessera-bench-cache-")
        env = dict(os.environ, TESSERA_CACHE_DIR=cache)
        cold.append(first_line_ms([tessera, "--first-result-ms"], env))
        warm.append(first_line_ms([tessera, "--first-result-ms"], env))
        shutil.rmtree(cache, ignore_errors=True)
        if have_halide:
            hcomp.append(first_line_ms([halide, "--compile-ms"]))

    # Throughputs: the best round; times (hot launch, direct call): the median.
    m = {k: (median(v) if k[1] in ("BM_HotLaunch", "BM_DirectCall") else max(v)) for k, v in samples.items()}
    print(f"\n## CPU kernels, side by side ({os.cpu_count()} cores, best of {args.rounds} interleaved rounds, GB/s)\n")
    if torch_info:
        print(f"PyTorch {torch_info['torch_version']} ({torch_info['threads']} threads), Halide 14 (Debian), "
              "tessera with the host compiler.\n")
    print("| workload | tessera | torch eager | torch.compile | Halide | tessera / best peer | "
          "tessera / torch | tessera / Halide | target |")
    print("|---|---|---|---|---|---|---|---|---|")
    chart_rows = []
    for name, tb, hb, tk, target in WORKLOADS:
        t = m.get(("tessera", tb))
        te, tc = m.get(("torch", tk + "_eager")), m.get(("torch", tk + "_compile"))
        h = m.get(("halide", hb))
        torch_best = max([x for x in (te, tc) if x is not None], default=None)
        peers = [x for x in (te, tc, h) if x is not None]
        best = max(peers) if peers else None

        def ratio(p):
            return None if (p is None or t is None) else t / p

        print(f"| {name} | {fmt(t)} | {fmt(te)} | {fmt(tc)} | {fmt(h)} | {fmt(ratio(best), 'x')} | "
              f"{fmt(ratio(torch_best), 'x')} | {fmt(ratio(h), 'x')} | {target} |")
        chart_rows.append((name.split(" (")[0] + (" (one tile)" if "one tile" in name else ""), [t, te, tc, h]))
    chart(args, "cpu_kernels", ["workload", "tessera", "torch eager", "torch.compile", "Halide"], chart_rows,
          f"CPU kernels, GB/s ({os.cpu_count()} cores, best of {args.rounds} rounds)", "GB/s")

    hot, direct = m.get(("tessera", "BM_HotLaunch")), m.get(("tessera", "BM_DirectCall"))
    c, w, hc = median(cold), median(warm), median(hcomp)
    print(f"\n## Latency (median of {args.rounds} fresh processes)\n")
    print("| measure | value | reference | ratio | target |")
    print("|---|---|---|---|---|")
    print(f"| cold compile, seed kernel to first result | {fmt(c, ' ms')} | Halide JIT compile of the same "
          f"pipeline: {fmt(hc, ' ms')} | {fmt(None if not hc else c / hc, 'x')} | ≤1.0x |")
    print(f"| new process, warm disk cache, to first result | {fmt(w, ' ms')} | cold: {fmt(c, ' ms')} | "
          f"{fmt(w / c, 'x')} | ≤0.05x |")
    print(f"| hot launch, one-program grid | {fmt(hot, ' ns')} | direct call of the compiled function: "
          f"{fmt(direct, ' ns')} | +{fmt(None if hot is None else hot - direct, ' ns')} | within 1 µs |")
    if not args.skip_compile:
        compile_section(args, have_torch)
    for n in notes:
        print(f"\nNote: {n}")


def compile_section(args, have_torch):
    """tessera::compile vs torch.compile on the seed's add_fn (see bench/peers/torch_compile_cpu.py)."""
    exe = os.path.join(args.build, "bench", "bench_compile_cpu")
    peer = os.path.join(ROOT, "bench", "peers", "torch_compile_cpu.py")
    rounds = max(1, min(args.rounds, 3))
    t_cold, t_warm, t_recompile, t_recompile_new = [], [], [], []
    p_cold, p_warm, p_call, p_recompile = [], [], [], []
    for r in range(rounds):
        print(f"compile round {r + 1}/{rounds}", file=sys.stderr)
        cache = tempfile.mkdtemp(prefix="tessera-bench-compile-")
        env = dict(os.environ, TESSERA_CACHE_DIR=cache)
        t_cold.append(first_line_ms([exe, "--first-call-ms"], env))
        t_warm.append(first_line_ms([exe, "--first-call-ms"], env))
        t_recompile.append(first_line_ms([exe, "--recompile-ms"], env))
        t_recompile_new.append(first_line_ms([exe, "--recompile-new-kernel-ms"], env))
        shutil.rmtree(cache, ignore_errors=True)
        if have_torch:
            tcache = tempfile.mkdtemp(prefix="torch-bench-compile-")
            tenv = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=tcache, TRITON_CACHE_DIR=os.path.join(tcache, "triton"))
            run = lambda mode: float(subprocess.run([args.python, peer, mode], check=True, capture_output=True,
                                                    text=True, env=tenv).stdout.strip().splitlines()[-1])
            p_cold.append(run("first-call") * 1e3)
            p_warm.append(run("first-call") * 1e3)
            p_call.append(run("per-call"))
            p_recompile.append(run("recompile") * 1e3)
            shutil.rmtree(tcache, ignore_errors=True)
    calls = gbench(exe, "CompiledAddFnN4|EagerAddFnN4|GuardCheckFourInputs|GuardCheckFourDynamicInputs", args.min_time)
    per_call = calls.get("BM_CompiledAddFnN4") / 1e3 if calls.get("BM_CompiledAddFnN4") else None
    m = median
    print(f"\n## tessera::compile vs torch.compile, the seed's add_fn on CPU (median of {rounds} fresh processes)\n")
    print("torch.compile runs the same computation in PyTorch ops: on a machine without a GPU, Triton cannot run "
          "the user kernel.\n")
    print("| measure | tessera | torch.compile | ratio | target |")
    print("|---|---|---|---|---|")

    def row(name, t, p, unit, target):
        ratio = None if (t is None or p is None) else t / p
        print(f"| {name} | {fmt(t, unit)} | {fmt(p, unit)} | {fmt(ratio, 'x')} | {target} |")

    row("first call, cold caches", m(t_cold), m(p_cold), " ms", "≤0.1x")
    row("first call, new process, warm caches", m(t_warm), m(p_warm), " ms", "≤0.1x")
    row("per call at n = 4", per_call, m(p_call), " µs", "≤0.1x")
    row("recompile to a dynamic size (n = 5), the kernel compiled anew", m(t_recompile_new),
        m(p_recompile), " ms", "≤0.1x")
    row("recompile to a dynamic size (n = 5), a re-trace only (tessera's kernel was cached; "
        "torch builds new C++)", m(t_recompile), m(p_recompile), " ms", "—")
    chart(args, "cpu_compile", ["measure", "tessera::compile", "torch.compile"],
          [("first call cold", [m(t_cold), m(p_cold)]),
           ("first call warm", [m(t_warm), m(p_warm)]),
           ("per call n=4", [None if per_call is None else per_call / 1e3,
                             None if m(p_call) is None else m(p_call) / 1e3]),
           ("recompile (new kernel)", [m(t_recompile_new), m(p_recompile)])],
          "the seed's add_fn compiled, CPU (ms, log scale)", "ms", log_y=True)
    print(f"\nEager add_fn at n = 4: {fmt(calls.get('BM_EagerAddFnN4'), ' ns')}; guard check of four tensor "
          f"arguments: {fmt(calls.get('BM_GuardCheckFourInputs'), ' ns')} static, "
          f"{fmt(calls.get('BM_GuardCheckFourDynamicInputs'), ' ns')} dynamic (target ≤100 ns).")


if __name__ == "__main__":
    main()
