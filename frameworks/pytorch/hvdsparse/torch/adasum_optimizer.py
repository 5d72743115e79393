"""DistributedOptimizer(op=hvd.Adasum): Horovod's delta optimizer.

Adasum combines what each rank's optimizer would do, not the raw gradients: for each parameter,
as soon as its gradient is ready (after backward_passes_per_step passes), the wrapped optimizer
steps that parameter alone from a zero start, so the parameter then holds this rank's update
-lr f(g); that update is allreduced with Adasum in the background, and step() adds the combined
update to the parameter's value from before. Momentum and other state stay per rank, as in
Horovod.
"""
from contextlib import contextmanager

import torch

from hvdsparse.torch import mpi_ops
from hvdsparse.torch.parameter_names import parameter_names


class _AdasumDeltaMixin:
    """Mixed in before the wrapped optimizer's class."""

    def __init__(self, params, named_parameters, compression, backward_passes_per_step):
        super().__init__(params)
        params = [p for group in self.param_groups for p in group["params"]]
        self._hvds_names = parameter_names(self.param_groups, named_parameters)
        self._hvds_compression = compression
        self.backward_passes_per_step = backward_passes_per_step
        self._hvds_delay = {p: backward_passes_per_step for p in self._hvds_names}
        self._hvds_start = {p: torch.zeros_like(p, requires_grad=False) for p in self._hvds_names}
        self._hvds_pending = {}  # parameter -> (handle, compression context)
        self._hvds_hooked = []
        for p in params:
            if p.requires_grad:
                p.grad = torch.zeros_like(p)
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                acc.register_hook(self._hvds_hook(p))
                self._hvds_hooked.append((p, acc))

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._hvds_delay:
            self._hvds_delay[p] = passes

    def _hvds_local_update(self, p):
        """Steps p alone from a zero start (p then holds -lr f(g)) and allreduces that."""
        start = self._hvds_start[p]
        start.copy_(p.detach())
        saved = [group["params"] for group in self.param_groups]
        for group in self.param_groups:
            group["params"] = [p] if any(p is q for q in group["params"]) else []
        try:
            with torch.no_grad():
                p.zero_()
                super().step()
        finally:
            for group, kept in zip(self.param_groups, saved):
                group["params"] = kept
        delta, ctx = self._hvds_compression.compress(p.detach())
        handle = mpi_ops.allreduce_async_(delta, name=self._hvds_names.get(p), op=mpi_ops.Adasum)
        return handle, ctx, delta

    def _hvds_hook(self, p):
        def hook(*_):
            if self._hvds_delay[p] <= 0:
                raise AssertionError("Gradients were computed more than backward_passes_per_step "
                                     "times before call to step(). Increase "
                                     "backward_passes_per_step to accumulate gradients locally.")
            self._hvds_delay[p] -= 1
            if self._hvds_delay[p] == 0:
                self._hvds_pending[p] = self._hvds_local_update(p)
        return hook

    def synchronize(self):
        pass

    @contextmanager
    def skip_synchronize(self):
        raise AssertionError("Skipping synchronization is not supported when using Adasum "
                             "optimizer.")

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for p in self._hvds_names:
            if p.requires_grad and p not in self._hvds_pending:
                self._hvds_pending[p] = self._hvds_local_update(p)
        with torch.no_grad():
            for p, (handle, ctx, delta) in self._hvds_pending.items():
                mpi_ops.synchronize(handle)
                update = self._hvds_compression.decompress(delta, ctx)
                p.copy_(self._hvds_start[p] + update.to(p.dtype))
                self._hvds_delay[p] = self.backward_passes_per_step
        self._hvds_pending.clear()
        return loss

    def zero_grad(self, *args, **kwargs):
        if self._hvds_pending:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                                 "before optimizer.step() or optimizer.synchronize(). This is "
                                 "prohibited as it can cause a race condition.")
        return super().zero_grad(*args, **kwargs)


def make(optimizer, named_parameters, compression, backward_passes_per_step, process_set):
    """The Adasum delta optimizer over optimizer's parameter groups and state."""
    if process_set is not None and process_set.process_set_id != 0:
        raise NotImplementedError("Adasum does not support non-global process sets yet.")
    cls = type(optimizer.__class__.__name__, (_AdasumDeltaMixin, optimizer.__class__), {})
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step)
