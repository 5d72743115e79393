"""SyncBatchNorm: with every rank holding a slice of the batch, outputs, input gradients and
running statistics equal plain BatchNorm on the whole batch in one process."""
import torch

import hvdsparse.torch as hvd


def _full_batch(n_per_rank):
    g = torch.Generator().manual_seed(7)
    return torch.randn(n_per_rank * hvd.size(), 3, 5, 4, generator=g, dtype=torch.float64)


def test_sync_batch_norm_matches_full_batch():
    n = 4
    full = _full_batch(n)
    ref = torch.nn.BatchNorm2d(3).double()
    sync = hvd.SyncBatchNorm(3).double()
    with torch.no_grad():
        for m in (ref, sync):
            m.weight.copy_(torch.linspace(0.5, 1.5, 3))
            m.bias.copy_(torch.linspace(-0.2, 0.2, 3))

    x_ref = full.clone().requires_grad_(True)
    out_ref = ref(x_ref)
    (out_ref * torch.arange(out_ref.numel(), dtype=torch.float64).view_as(out_ref)).sum().backward()

    lo, hi = hvd.rank() * n, (hvd.rank() + 1) * n
    x = full[lo:hi].clone().requires_grad_(True)
    out = sync(x)
    weights = torch.arange(out_ref.numel(), dtype=torch.float64).view_as(out_ref)[lo:hi]
    (out * weights).sum().backward()

    assert torch.allclose(out, out_ref[lo:hi].detach(), atol=1e-10)
    assert torch.allclose(x.grad, x_ref.grad[lo:hi], atol=1e-9)
    assert torch.allclose(sync.running_mean, ref.running_mean, atol=1e-12)
    assert torch.allclose(sync.running_var, ref.running_var, atol=1e-12)
    # Weight gradients are per-rank partial sums; their allreduce is the full-batch gradient.
    wsum = hvd.allreduce(sync.weight.grad, op=hvd.Sum, name="bn.wgrad")
    assert torch.allclose(wsum, ref.weight.grad, atol=1e-9)


def test_sync_batch_norm_eval_is_plain_batch_norm():
    bn = hvd.SyncBatchNorm(3).double().eval()
    x = _full_batch(2)
    assert torch.allclose(bn(x), torch.nn.functional.batch_norm(
        x, bn.running_mean, bn.running_var, bn.weight, bn.bias, False, 0.0, bn.eps))
