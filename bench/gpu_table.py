"""Joins the JSON lines of bench_gpu_kernels (--json, launch, first-launch) and
bench/peers/triton_gpu.py, all measured in one run on one GPU, into one markdown table: each
workload's tessera figure, each peer's, and tessera's ratio to each (above 1: tessera is faster;
for times, the peer's time over tessera's). Lines that are not JSON (a failed peer's message) are
printed below the table, so nothing is hidden.

    python3 bench/gpu_table.py results.jsonl [more.jsonl ...]
"""
import json
import statistics
import sys


def main(paths):
    rows, order, other = {}, [], []
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    r = json.loads(line)
                except ValueError:
                    other.append(f"{path}: {line}")
                    continue
                key = (r["kernel"], r["size"])
                if key not in rows:
                    rows[key] = {}
                    order.append(key)
                rows[key].setdefault(r["impl"], []).append(r)
    peers = []
    for key in order:
        for impl in rows[key]:
            if impl != "tessera" and impl not in peers:
                peers.append(impl)
    head = "| kernel | size | tessera |" + "".join(f" {p} | tessera/{p} |" for p in peers)
    print(head)
    print("|---" * (3 + 2 * len(peers)) + "|")
    for key in order:
        impls = rows[key]

        def figure(impl):
            """GB/s when the rows have it (higher is better), else the median time in us."""
            rs = impls.get(impl)
            if not rs:
                return None, None
            if "gbs" in rs[0]:
                return statistics.median(r["gbs"] for r in rs), "GB/s"
            if "tflops" in rs[0]:
                return statistics.median(r["tflops"] for r in rs), "TFLOP/s"
            return statistics.median(r["us"] for r in rs), "us"

        t, unit = figure("tessera")
        cells = [key[0], key[1], f"{t:.1f} {unit}" if t is not None else "-"]
        for p in peers:
            v, peer_unit = figure(p)
            if v is None:
                cells += ["-", "-"]
                continue
            cells.append(f"{v:.1f} {peer_unit}")
            if t is None:
                cells.append("-")
            else:
                ratio = t / v if unit in ("GB/s", "TFLOP/s") else v / t
                cells.append(f"{ratio:.2f}x")
        print("| " + " | ".join(cells) + " |")
    for line in other:
        print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
