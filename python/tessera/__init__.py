"""tessera from Python: tensors that share memory with NumPy and PyTorch through DLPack, every
registered operator (built-in, or C++ ``triton_op``/``custom_op`` libraries loaded with
``load_library``) callable on them, and the graph compiler over an operator. docs/python.md.

    import numpy as np, tessera
    x = tessera.from_dlpack(np.arange(4, dtype=np.float32))   # no copy
    y = tessera.ops.aten.add(x, x)                              # a tessera.Tensor
    np.from_dlpack(y)                                           # no copy back
"""
from ._tessera import (  # noqa: F401
    AssertionError, CompileError, CompiledOp, DataError, DeviceError, DTypeError, Error,
    IndexError, InternalError, NotImplementedError, OutOfMemoryError, RuntimeError, ShapeError,
    Tensor, TypeError, ValueError, __version__, call, compile, from_dlpack, load_library,
    operators, schema,
)

__all__ = [
    "Tensor", "from_dlpack", "ops", "call", "compile", "load_library", "operators", "schema",
    "Error", "ValueError", "TypeError", "IndexError", "ShapeError", "DTypeError", "DeviceError",
    "DataError", "CompileError", "NotImplementedError", "RuntimeError", "OutOfMemoryError",
    "InternalError", "AssertionError",
]


class _Operator:
    """``tessera.ops.<namespace>.<name>[.<overload>]``: calling it calls the operator."""

    def __init__(self, qualified):
        self._qualified = qualified

    def __call__(self, *args, **kwargs):
        return call(self._qualified, *args, **kwargs)

    def __getattr__(self, overload):
        if overload.startswith("__"):
            raise AttributeError(overload)
        return _Operator(self._qualified + "." + overload)

    def __repr__(self):
        return "<tessera operator " + self._qualified + ">"


class _Namespace:
    def __init__(self, name):
        self._name = name

    def __getattr__(self, op):
        if op.startswith("__"):
            raise AttributeError(op)
        return _Operator(self._name + "::" + op)


class _Ops:
    """Operators by namespace: ``tessera.ops.aten.relu(x)``, ``tessera.ops.mylib.my_op(x, y)``."""

    def __getattr__(self, namespace):
        if namespace.startswith("__"):
            raise AttributeError(namespace)
        return _Namespace(namespace)


ops = _Ops()


def _binary(name):
    def method(self, other):
        return call(name, self, other)
    return method


# Arithmetic on tessera tensors goes through the same operators (and their kernels).
Tensor.__add__ = _binary("aten::add")
Tensor.__radd__ = _binary("aten::add")  # commutes: the tensor goes first
Tensor.__sub__ = _binary("aten::sub")
Tensor.__mul__ = _binary("aten::mul")
Tensor.__rmul__ = _binary("aten::mul")
Tensor.__truediv__ = _binary("aten::div")
Tensor.__matmul__ = _binary("aten::matmul")
Tensor.__neg__ = lambda self: call("aten::neg", self)
