# examples/custom_op.cc in PyTorch: autograd.Function and gradcheck.
import torch


class Softplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.log(torch.exp(x) + 1)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.sigmoid(x)


class ScaleShift(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        return x * w + b

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad * w, (grad * x).sum(0), grad.sum(0)


g = torch.Generator().manual_seed(0)
one = torch.autograd.gradcheck(Softplus.apply, (torch.randn(4, 3, dtype=torch.float64, generator=g, requires_grad=True),))
three = torch.autograd.gradcheck(ScaleShift.apply, tuple(
    torch.randn(*s, dtype=torch.float64, generator=g, requires_grad=True) for s in [(5, 3), (3,), (3,)]))
print(f"softplus: {'ok' if one else 'failed'}")
print(f"scale_shift: {'ok' if three else 'failed'}")

w = torch.ones(3, requires_grad=True)
loss = Softplus.apply(ScaleShift.apply(torch.randn(2, 3, generator=g), w, torch.zeros(3))).sum()
loss.backward()
print(f"loss {loss.item():.4f}, grad of w {list(w.grad.shape)}")
raise SystemExit(0 if one and three else 1)
