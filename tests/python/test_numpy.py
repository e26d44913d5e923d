"""tessera from Python with NumPy (issue 20): zero-copy DLPack both ways, operators by name,
C++ triton_ops from a loaded library, the graph compiler over an operator, errors as Python
exceptions with tessera's messages. Plain asserts (no pytest needed); exits non-zero on failure.
Results are checked against NumPy in float64 on fresh random inputs."""
import os
import sys

import numpy as np

import tessera

rng = np.random.default_rng(int(os.environ.get("TESSERA_TEST_SEED", "20261203")))
failures = []


def check(name, fn):
    try:
        fn()
        print("ok  ", name)
    except Exception as e:  # noqa: BLE001 - report every failure, then exit non-zero
        import traceback
        traceback.print_exc()
        failures.append(name)
        print("FAIL", name, "-", type(e).__name__, e)


def close(got, want, rtol=1e-6, atol=1e-6):
    got = np.from_dlpack(got) if isinstance(got, tessera.Tensor) else np.asarray(got)
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(want, dtype=np.float64),
                               rtol=rtol, atol=atol)


def zero_copy_both_ways():
    a = rng.standard_normal((5, 7)).astype(np.float32)
    x = tessera.from_dlpack(a)
    assert x.shape == (5, 7) and x.dtype == "float32" and x.device == "cpu"
    a[2, 3] = 123.0  # the tensor views NumPy's memory
    assert tessera.ops.aten.sum(x).item() == np.float32(a.sum(dtype=np.float32)) or \
        abs(tessera.ops.aten.sum(x).item() - float(a.sum())) < 1e-3
    y = tessera.ops.aten.mul(x, 2.0)
    b = np.from_dlpack(y)  # NumPy views tessera's memory
    assert not b.flags["OWNDATA"]
    close(b, a.astype(np.float64) * 2)
    z = tessera.from_dlpack(b)  # and back: the same memory again
    b[0, 0] = -1.0
    assert tessera.ops.aten.sum(z).item() == tessera.ops.aten.sum(y).item()
    # The producer's memory outlives its Python object while a tessera tensor views it.
    c = np.arange(10, dtype=np.float64)
    w = tessera.from_dlpack(c)
    del c
    close(tessera.ops.aten.add(w, w), np.arange(10) * 2.0)


def dtypes_and_strides():
    for dt in (np.float32, np.float64, np.float16, np.int32, np.int64, np.int8, np.uint8, np.bool_):
        a = (rng.standard_normal(11) * 10).astype(dt)
        x = tessera.from_dlpack(a)
        back = np.from_dlpack(x)
        assert back.dtype == a.dtype, (back.dtype, a.dtype)
        np.testing.assert_array_equal(back, a)
    base = rng.standard_normal((6, 8)).astype(np.float32)
    for view in (base.T, base[::2, 1::3], base[1:, 2:]):
        x = tessera.from_dlpack(view)
        assert x.shape == view.shape
        close(tessera.ops.aten.add(x, x), view.astype(np.float64) * 2)


def operators_against_numpy():
    a = rng.standard_normal((16, 9)).astype(np.float32)
    b = rng.standard_normal((9, 4)).astype(np.float32)
    x, y = tessera.from_dlpack(a), tessera.from_dlpack(b)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    close(tessera.ops.aten.matmul(x, y), a64 @ b64, rtol=1e-5, atol=1e-5)
    close(x @ y, a64 @ b64, rtol=1e-5, atol=1e-5)
    close(tessera.ops.aten.relu(x), np.maximum(a64, 0))
    close(tessera.ops.aten.exp(x), np.exp(a64), rtol=1e-6)
    close(x * 3 + 1, a64 * 3 + 1)
    close(x - x, np.zeros_like(a64))
    close(-x, -a64)
    close(tessera.ops.aten.sum(x, [1]), a64.sum(1), rtol=1e-5, atol=1e-5)
    close(tessera.ops.aten.sum(x, dim=[0], keepdim=True), a64.sum(0, keepdims=True),
          rtol=1e-5, atol=1e-5)
    close(tessera.ops.aten.add(x, x, alpha=0.5), a64 * 1.5)
    close(tessera.ops.aten.softmax(x, 1), np.exp(a64) / np.exp(a64).sum(1, keepdims=True),
          rtol=1e-5, atol=1e-6)
    values, indices = tessera.ops.aten.max.dim(x, 1)
    close(values, a64.max(1))
    np.testing.assert_array_equal(np.from_dlpack(indices), a.argmax(1))


def errors_are_python_exceptions():
    x = tessera.from_dlpack(np.ones((2, 3), np.float32))
    try:
        tessera.ops.aten.add(x, tessera.from_dlpack(np.ones(4, np.float32)))
        raise AssertionError("no error")
    except tessera.ShapeError as e:
        assert isinstance(e, ValueError) and isinstance(e, tessera.Error)
        assert "[add] the size of tensor a (3) must match the size of tensor b (4)" in str(e), e
    try:
        tessera.ops.aten.add(x, "two")
        raise AssertionError("no error")
    except TypeError as e:
        assert "no overload of aten::add takes these arguments" in str(e), e
        assert "'other' must be Scalar, got str" in str(e), e
    try:
        tessera.ops.aten.no_such_op(x)
        raise AssertionError("no error")
    except tessera.ValueError as e:
        assert "aten::no_such_op" in str(e), e
    try:
        tessera.from_dlpack([1, 2, 3])
        raise AssertionError("no error")
    except TypeError as e:
        assert "has no __dlpack__" in str(e), e


def a_library_of_cpp_triton_ops():
    tessera.load_library(os.environ["TESSERA_TEST_PYSEED_LIB"])
    assert "pyseed::add" in tessera.operators()
    assert tessera.schema("pyseed::add") == "pyseed::add(Tensor x, Tensor y) -> Tensor"
    a = rng.standard_normal(3000).astype(np.float32)
    b = rng.standard_normal(3000).astype(np.float32)
    close(tessera.ops.pyseed.add(a, b), a.astype(np.float64) + b)  # NumPy arrays in directly
    close(tessera.ops.pyseed.mysin(a), np.sin(a.astype(np.float64)), rtol=1e-5, atol=1e-6)
    try:
        tessera.load_library("/nonexistent/libnothing.so")
        raise AssertionError("no error")
    except tessera.RuntimeError as e:
        assert "cannot load /nonexistent/libnothing.so" in str(e), e


def the_graph_compiler_over_an_operator():
    tessera.load_library(os.environ["TESSERA_TEST_PYSEED_LIB"])
    f = tessera.compile("pyseed::add", fullgraph=True)
    for n in (5, 6, 1000, 7):
        a = rng.standard_normal(n).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        # tessera's own (64-byte aligned) copies: NumPy's alignment varies, and pointer
        # alignment is part of a kernel's specialization (a guard)
        x, y = tessera.from_dlpack(a).clone(), tessera.from_dlpack(b).clone()
        close(f(x, y), a.astype(np.float64) + b)
        close(f(a, b), a.astype(np.float64) + b)  # NumPy arrays directly (maybe recompiling)
    assert f.graphs >= 2, f.graphs  # static for 5, then dynamic
    g = tessera.compile("pyseed::add", fullgraph=True)
    for n in (5, 6, 1000, 7):
        x, y = tessera.ops.aten.randn([n]), tessera.ops.aten.randn([n])
        close(g(x, y), np.from_dlpack(x).astype(np.float64) + np.from_dlpack(y))
    assert g.graphs == 2, g.graphs  # static for 5, then one dynamic graph for every size
    assert "add_kernel" in f.graph, f.graph
    data = g.graph_data()  # the same graph as data: one kernel node reading both inputs
    kernels = [n for n in data["nodes"] if n["kind"] == "kernel"]
    assert [n["target"] for n in kernels] == ["add_kernel"], data["nodes"]
    inputs = [i for i in data["inputs"] if i >= 0]  # -1: a leaf that is not a tensor
    assert kernels[0]["reads"] == inputs, (kernels[0], data["inputs"])
    out = data["values"][kernels[0]["writes"][0]]
    assert out["sizes"] == ["s0"] and out["dtype"] == "float32", out
    assert out["storage"] == data["values"][data["outputs"][0]]["storage"], data
    # the result is the caller's: nothing of this graph is in the memory plan's arena
    assert data["arenas"] == [] and all(n["arena"] == -1 for n in data["nodes"]), data
    try:
        f(np.ones(3, np.float32))
        raise AssertionError("no error")
    except TypeError as e:
        assert "takes 2 tensors, got 1" in str(e), e


for name, fn in list(globals().items()):
    if callable(fn) and not name.startswith("_") and fn.__module__ == "__main__" and \
            name not in ("check", "close"):
        check(name, fn)

if failures:
    print(len(failures), "failed:", ", ".join(failures))
    sys.exit(1)
print("all passed")
