#!/usr/bin/env python3
"""tessera's CPU kernels beside PyTorch (eager and torch.compile) and Halide 14, in one run.

Runs each side in turn for several rounds, so that the shared machine's slow phases (its memory
bandwidth swings between about 30 and 60 GB/s over minutes) fall on all of them alike, keeps each
side's best round per workload (throughput) or median (latency), and prints a Markdown table of
throughputs and ratios against the issue's targets, then the latency table (cold compile,
warm-cache first result, hot launch).

    python3 bench/compare_cpu.py [--build build] [--python .venv-bench/bin/python] [--rounds 3]

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
    ("layer norm 4096x4096", "BM_LayerNormKernel/real_time", "BM_HalideLayerNorm/real_time", "layer_norm",
     "≥1.0x torch, ≥0.9x Halide"),
]


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
    args = ap.parse_args()

    tessera = os.path.join(args.build, "bench", "bench_kernels_cpu")
    halide = os.path.join(args.build, "bench", "bench_halide_cpu")
    have_halide = os.path.exists(halide)
    torch_script = os.path.join(ROOT, "bench", "peers", "torch_cpu.py")
    have_torch = subprocess.run([args.python, "-c", "import torch"], capture_output=True).returncode == 0
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
        t = gbench(tessera, "AddKernel/4096|SoftmaxKernel|LayerNormKernel|HotLaunch|DirectCall", args.min_time)
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
    for n in notes:
        print(f"\nNote: {n}")


if __name__ == "__main__":
    main()
