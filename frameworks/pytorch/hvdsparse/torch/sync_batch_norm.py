"""SyncBatchNorm: batch normalization whose statistics span every rank of a process set.

In training mode each rank computes per-channel sums of x and x*x and its element count; one
differentiable allreduce (Sum) of the three gives the global mean and biased variance, so the
gradients also flow across ranks. Running statistics use the unbiased global variance, as
torch.nn.BatchNorm does. In evaluation mode it is plain batch normalization.
"""
import torch
from torch.nn.modules.batchnorm import _BatchNorm

from hvdsparse.common.process_sets import global_process_set
from hvdsparse.common.ops import Sum
from hvdsparse.torch.mpi_ops import allreduce, size


class SyncBatchNorm(_BatchNorm):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_set=global_process_set):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_set = process_set

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError('expected at least 2D input (got {}D input)'.format(input.dim()))

    def _run_bn(self, input):
        return torch.nn.functional.batch_norm(
            input, self.running_mean, self.running_var, self.weight, self.bias,
            self.training or not self.track_running_stats, self.momentum or 0.0, self.eps)

    def forward(self, input):
        self._check_input_dim(input)
        if not self.training or size() == 1:
            return self._run_bn(input)
        if self.training and self.track_running_stats:
            self.num_batches_tracked += 1
        c = input.shape[1]
        dims = [0] + list(range(2, input.dim()))
        x = input if input.dtype == torch.float64 else input.float()
        count = torch.tensor([float(x.numel() // c)], dtype=x.dtype, device=x.device)
        local = torch.cat([x.sum(dims), (x * x).sum(dims), count])
        total = allreduce(local, op=Sum, name=None, process_set=self.process_set)
        n = total[2 * c]
        mean = total[:c] / n
        var = total[c:2 * c] / n - mean * mean
        if self.track_running_stats:
            momentum = self.momentum if self.momentum is not None else \
                1.0 / float(self.num_batches_tracked)
            with torch.no_grad():
                unbiased = var * n / torch.clamp(n - 1, min=1)
                self.running_mean.mul_(1 - momentum).add_(momentum * mean.to(self.running_mean.dtype))
                self.running_var.mul_(1 - momentum).add_(momentum * unbiased.to(self.running_var.dtype))
        shape = [1, c] + [1] * (input.dim() - 2)
        out = (x - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.affine:
            out = out * self.weight.view(shape) + self.bias.view(shape)
        return out.to(input.dtype)
