#!/usr/bin/env python3
"""Before/after, side by side in one run: the same benchmarks from two builds of tessera,
alternated round by round on this machine, medians and the after/before ratio.

  python3 bench/ab.py --before BUILD_DIR --after BUILD_DIR [--rounds 5]
  make bench-ab BEFORE=<git revision>     # builds the revision in build-ab/ first

Measures what a redesign must not slow down: kernel throughput (GB/s, higher is better), the
hot launch and the compiled per-call time (ns), and the first result of a new process with cold
and with warm caches (ms). Each build needs bench_kernels_cpu and bench_compile_cpu; benchmarks missing from one build are reported, not compared.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

KERNELS = ["BM_AddKernel/16384/real_time", "BM_SoftmaxKernel/real_time", "BM_LayerNormKernel/real_time",
           "BM_MatmulKernel/real_time", "BM_HotLaunch"]
COMPILE = ["BM_CompiledAddFnN4", "BM_CompiledAddFnDynamic"]


def gbench(exe, names, min_time):
    flt = "^(" + "|".join(names) + ")$"
    out = subprocess.run([exe, f"--benchmark_filter={flt}", f"--benchmark_min_time={min_time}",
                          "--benchmark_format=json"], check=True, capture_output=True, text=True).stdout
    res = {}
    for b in json.loads(out)["benchmarks"]:
        if "bytes_per_second" in b:
            res[b["name"]] = (b["bytes_per_second"] / 1e9, "GB/s")
        else:
            unit = b.get("time_unit", "ns")
            scale = {"ns": 1, "us": 1e3, "ms": 1e6}[unit]
            res[b["name"]] = (b["real_time"] * scale, "ns")
    return res


def first_ms(cmd, cache):
    env = dict(os.environ, TESSERA_CACHE_DIR=cache)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return float(out.strip().splitlines()[-1])


def one_round(build, min_time):
    r = {}
    r.update(gbench(os.path.join(build, "bench", "bench_kernels_cpu"), KERNELS, min_time))
    r.update(gbench(os.path.join(build, "bench", "bench_compile_cpu"), COMPILE, min_time))
    with tempfile.TemporaryDirectory() as cache:
        cli = os.path.join(build, "bench", "bench_kernels_cpu")
        r["first result, cold caches (seed kernel)"] = (first_ms([cli, "--first-result-ms"], cache), "ms")
        r["first result, new process, warm disk cache"] = (first_ms([cli, "--first-result-ms"], cache), "ms")
    with tempfile.TemporaryDirectory() as cache:
        exe = os.path.join(build, "bench", "bench_compile_cpu")
        r["compiled add_fn first call, cold"] = (first_ms([exe, "--first-call-ms"], cache), "ms")
        r["compiled add_fn first call, warm"] = (first_ms([exe, "--first-call-ms"], cache), "ms")
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.3)
    a = ap.parse_args()
    runs = {"before": [], "after": []}
    for i in range(a.rounds):
        order = ["before", "after"] if i % 2 == 0 else ["after", "before"]
        for side in order:
            runs[side].append(one_round(getattr(a, side), a.min_time))
        print(f"round {i + 1}/{a.rounds} done", file=sys.stderr)
    names = list(runs["after"][0].keys())
    print(f"| measure | before | after | after/before | better is |")
    print("|---|---|---|---|---|")
    worst = 0.0
    for n in names:
        if n not in runs["before"][0]:
            print(f"| {n} | — | (only after) | | |")
            continue
        unit = runs["after"][0][n][1]
        b = statistics.median(r[n][0] for r in runs["before"])
        f = statistics.median(r[n][0] for r in runs["after"])
        higher = unit == "GB/s"
        ratio = f / b if b else float("nan")
        loss = (1 / ratio - 1) if higher else (ratio - 1)
        worst = max(worst, loss)
        print(f"| {n} | {b:.4g} {unit} | {f:.4g} {unit} | {ratio:.3f} | {'higher' if higher else 'lower'} |")
    print(f"\nmedians of {a.rounds} alternated rounds; worst loss {worst * 100:.1f}%")


if __name__ == "__main__":
    main()
