"""tessera from PyTorch (issue 20): torch tensors in and out through DLPack with no copy, the
seed's C++ triton_ops in a PyTorch training step (forward mysin, backward mycos through
torch.autograd.Function), and CUDA tensors where a GPU is present. Skips (exit 77) without
PyTorch. docs/python.md shows the same code."""
import os
import sys

try:
    import torch
except ImportError:
    print("skipped: PyTorch is not installed here (pip install torch to run this test)")
    sys.exit(77)

import tessera

tessera.load_library(os.environ["TESSERA_TEST_PYSEED_LIB"])
torch.manual_seed(int(os.environ.get("TESSERA_TEST_SEED", "20261203")))


class MySin(torch.autograd.Function):
    """y = sin(x) by the C++ triton_op pyseed::mysin; dy/dx = cos(x) by pyseed::mycos."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.from_dlpack(tessera.ops.pyseed.mysin(x.detach().contiguous()))

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.from_dlpack(tessera.ops.pyseed.mycos(x.detach().contiguous()))


def devices():
    yield "cpu"
    if torch.cuda.is_available():
        yield "cuda"


def check(device):
    # Zero-copy both ways.
    a = torch.randn(1000, device=device)
    b = torch.randn(1000, device=device)
    out = tessera.ops.pyseed.add(a, b)
    assert out.device.startswith(device), out.device
    t = torch.from_dlpack(out)
    torch.testing.assert_close(t, a + b)
    again = tessera.from_dlpack(t)
    t.fill_(3.0)  # the same memory everywhere
    assert tessera.ops.aten.sum(again).item() == 3000.0
    # A training step.
    w = torch.randn(64, device=device, dtype=torch.float32, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    target = torch.zeros(64, device=device)
    loss = ((MySin.apply(w) - target) ** 2).sum()
    opt.zero_grad()
    loss.backward()
    w0 = w.detach().clone()
    torch.testing.assert_close(w.grad, 2 * torch.sin(w0) * torch.cos(w0), rtol=1e-5, atol=1e-5)
    opt.step()
    torch.testing.assert_close(w.detach(), w0 - 0.1 * 2 * torch.sin(w0) * torch.cos(w0))
    print("ok", device)


for device in devices():
    check(device)
print("all passed")
