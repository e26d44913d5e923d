"""The compiled add_fn's first call with NVRTC's files out of the page cache, as on a fresh machine
(`posix_fadvise(DONTNEED)` on each file before each run), with the CUDA runtime's background
read-ahead of them (TESSERA_NVRTC_PREFETCH=1, the default) and without it, alternating, two rounds;
each run in a new process with an empty TESSERA_CACHE_DIR. Prints `bench_gpu_kernels
compiled-first cold`'s JSON lines with the variant in "impl"; on stderr, how much of each file was
resident before and after the eviction.

    python3 bench/nvrtc_cold.py build-gpu/bench/bench_gpu_kernels
"""
import ctypes
import glob
import json
import mmap
import os
import subprocess
import sys
import tempfile


def nvrtc_files():
    dirs = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
    found = set()
    for d in dirs:
        if not d:
            continue
        for sub in ("lib64", "lib", "targets/*/lib"):
            for f in glob.glob(os.path.join(d, sub, "libnvrtc*.so*")):
                if os.path.isfile(f):
                    found.add(os.path.realpath(f))
    return sorted(found)


def resident(path):
    """The fraction of the file's pages in the page cache (mincore of a read-only mapping)."""
    size = os.path.getsize(path)
    if size == 0:
        return 1.0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    page = mmap.PAGESIZE
    pages = (size + page - 1) // page
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            return -1.0
        vec = (ctypes.c_ubyte * pages)()
        rc = libc.mincore(addr, size, vec)
        libc.munmap(addr, size)
        return sum(v & 1 for v in vec) / pages if rc == 0 else -1.0
    finally:
        os.close(fd)


def evict(files):
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def main():
    binary = sys.argv[1]
    files = nvrtc_files()
    if not files:
        sys.exit("no libnvrtc under $CUDA_HOME or /usr/local/cuda")
    for rnd in (1, 2):
        for prefetch in ("1", "0"):
            before = [resident(f) for f in files]
            evict(files)
            after = [resident(f) for f in files]
            print(f"round {rnd}, prefetch {prefetch}: resident before/after eviction " +
                  ", ".join(f"{os.path.basename(f)} {b:.0%}/{a:.0%}"
                            for f, b, a in zip(files, before, after)), file=sys.stderr)
            env = dict(os.environ, TESSERA_NVRTC_PREFETCH=prefetch,
                       TESSERA_CACHE_DIR=tempfile.mkdtemp())
            out = subprocess.run([binary, "compiled-first", "cold"], env=env, check=True,
                                 capture_output=True, text=True).stdout
            for line in out.splitlines():
                try:
                    row = json.loads(line)
                except ValueError:
                    print(line)
                    continue
                row["impl"] = f"tessera, NVRTC evicted, prefetch {'on' if prefetch == '1' else 'off'}"
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
