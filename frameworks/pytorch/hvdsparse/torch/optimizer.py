"""DistributedOptimizer: averages gradients across ranks while backward() is still running.

Each parameter gets a hook that fires after its gradient is accumulated; after
backward_passes_per_step passes the hook starts an asynchronous in-place allreduce of the
gradient (or, with groups, one grouped allreduce once every member of the group is ready).
step() waits for all of them (synchronize()) and then runs the wrapped optimizer's step.
"""
import os
import warnings
from contextlib import contextmanager

import torch

from hvdsparse.common import _lib
from hvdsparse.common.ops import predivide_scales
from hvdsparse.common.topk import check_quantize_bits, is_topk
from hvdsparse.torch import mpi_ops, topk
from hvdsparse.torch.compression import Compression
from hvdsparse.torch.mpi_ops import Adasum, Average, global_process_set
from hvdsparse.torch.parameter_names import parameter_names

_OVERFLOW = ("Gradients were computed more than backward_passes_per_step times before call to "
             "step(). Increase backward_passes_per_step to accumulate gradients locally.")
_ZERO_GRAD = ("optimizer.zero_grad() was called after loss.backward() but before "
              "optimizer.step() or optimizer.synchronize(). This is prohibited as it can cause a "
              "race condition.")
_STEP_AFTER_SYNC = ("optimizer.step() called without optimizer.skip_synchronize() context after "
                    "optimizer.synchronize(). This can cause training slowdown. You may want to "
                    "consider using optimizer.skip_synchronize() context if you use "
                    "optimizer.synchronize() in your code.")


def _split(items, n):
    """n nearly equal consecutive chunks of items."""
    k, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + k + (1 if i < extra else 0)
        if end > start:
            out.append(items[start:end])
        start = end
    return out


class _DistributedMixin(topk.ResidualStateMixin):
    """Placed in front of the wrapped optimizer's class in a class made for each instance."""

    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, groups, sparse_as_dense, process_set,
                 sparse_algorithm=None, sparse_params=None, sparse_detect=None, quantize_bits=0):
        super().__init__(params)
        # Compression.topk: compressed gradients take the sparse path (topk.py); the others,
        # tensors below its min_numel, go dense and uncompressed.
        self._topk = compression if is_topk(compression) else None
        self._compression = Compression.none if self._topk is not None else compression
        self._quantize_bits = quantize_bits
        all_params = [p for g in self.param_groups for p in g["params"]]
        self._parameter_names = parameter_names(self.param_groups, named_parameters)
        named_parameters = [(name, p) for p, name in self._parameter_names.items()]
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {p: backward_passes_per_step for p in all_params}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.sparse_algorithm = sparse_algorithm
        self._sparse_detect = sparse_detect
        self._sparse_params = self._param_set(sparse_params, named_parameters)
        self._sparse_grads = {}     # parameter whose gradient has been sparse -> its sparse_dim
        self.process_set = process_set
        self._handles = {}          # param or group tuple -> (handle, compression contexts)
        self._hook_handles = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        self._p_to_group = {}
        self._group_ready = {}      # group tuple -> params whose gradient is ready
        self._setup_groups(groups, all_params)
        # Ranks outside process_set leave their gradients alone (step() is the wrapped
        # optimizer's), as in Horovod.
        if process_set.included() and (mpi_ops.size() > 1 or
                                       os.environ.get("HOROVOD_ELASTIC") == "1" or
                                       self._topk is not None):  # top-k acts even on one rank
            self._register_hooks()

    # ---- setup ----
    @staticmethod
    def _param_set(sparse_params, named_parameters):
        """sparse_params (names or parameters) as a set of parameters."""
        by_name = dict(named_parameters)
        out = set()
        for item in sparse_params or []:
            if isinstance(item, str):
                if item not in by_name:
                    raise ValueError("sparse_params names %r, which is not in "
                                     "named_parameters" % item)
                out.add(by_name[item])
            elif isinstance(item, torch.Tensor):
                out.add(item)
            else:
                raise ValueError("sparse_params holds parameter names or parameters, not %r"
                                 % type(item).__name__)
        return out

    def _setup_groups(self, groups, all_params):
        if groups is None:
            return
        if isinstance(groups, int):
            ordered = [p for p in all_params if p.requires_grad]
            chunks = _split(ordered, groups)
        else:
            chunks = [list(g) for g in groups]
        for index, chunk in enumerate(chunks):
            group = tuple(chunk)
            for p in group:
                self._p_to_group[p] = (index, group)
            self._group_ready[group] = set()

    def _register_hooks(self):
        for group in self.param_groups:
            for p in group["params"]:
                if not p.requires_grad:
                    continue
                self._requires_update.add(p)
                if hasattr(p, "register_post_accumulate_grad_hook"):
                    self._hook_handles.append(p.register_post_accumulate_grad_hook(self._hook))
                else:  # torch < 2.1: hook the gradient accumulator node
                    acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    self._hook_handles.append(acc.register_hook(self._legacy_hook(p)))
                    self._hook_handles.append(acc)  # keep the node alive

    def _legacy_hook(self, p):
        def hook(*ignore):
            self._hook(p)
        return hook

    # ---- the hook ----
    def _hook(self, p):
        if self._allreduce_delay[p] <= 0:
            raise AssertionError(_OVERFLOW)
        self._allreduce_delay[p] -= 1
        if self._allreduce_delay[p] > 0:
            self._handles.setdefault(p, (None, None))
            return
        if p in self._p_to_group:
            _, group = self._p_to_group[p]
            ready = self._group_ready[group]
            ready.add(p)
            self._handles[p] = (None, None)
            if len(ready) == len(group):
                self._launch_group(group)
        else:
            self._handles[p] = self._allreduce_grad_async(p)

    # ---- launching allreduces ----
    def _scales(self):
        return predivide_scales(self.op, self.gradient_predivide_factor)

    def _prepare_grad(self, p):
        if p.grad is None:
            p.grad = self._zero_grad_for(p)
        if p.grad.is_sparse:
            self._sparse_grads[p] = p.grad.sparse_dim()
            if self.sparse_as_dense:
                p.grad = p.grad.to_dense()
        return p.grad

    def _detect(self, p):
        """opts.sparse_detect for p's dense allreduce: on for sparse_params, else the global
        sparse_detect (None: HVDSPARSE_SPARSE_DETECT's default)."""
        return True if p in self._sparse_params else self._sparse_detect

    def _zero_grad_for(self, p):
        """The contribution of a parameter unused in this step: an empty sparse gradient when
        its gradients have been sparse (so every rank takes the sparse path), else zeros."""
        if p in self._sparse_grads and not self.sparse_as_dense:
            return torch.sparse_coo_tensor(torch.empty(1, 0, dtype=torch.int64, device=p.device),
                                           p.data.new_empty((0,) + tuple(p.shape[1:])),
                                           p.shape)
        return torch.zeros_like(p.data)

    def _allreduce_grad_async(self, p):
        grad = self._prepare_grad(p)
        name = self._parameter_names.get(p)
        if grad.is_sparse:
            # Compression and gradient_predivide_factor do not apply (as in Horovod): the
            # values travel as they are and Average divides once; the op is checked there.
            handle = mpi_ops.sparse_allreduce_async(grad, name, self.op, self.process_set,
                                                    algorithm=self.sparse_algorithm)
            return handle, "sparse"
        pre, post = self._scales()
        if self._topk_applies(p):
            return self._topk_allreduce_async(p, grad, name, self.op, pre, post,
                                              self.process_set, self.sparse_algorithm,
                                              self._quantize_bits)
        compressed, ctx = self._compression.compress(grad)
        detect = self._detect(p)
        handle = mpi_ops._allreduce_async(compressed, compressed, name, self.op, pre, post,
                                          self.process_set, detect,
                                          self.sparse_algorithm if detect else None)
        return handle, (compressed, ctx)

    def _launch_group(self, group):
        index, _ = self._p_to_group[group[0]]
        grads = [self._prepare_grad(p) for p in group]
        if any(g.is_sparse for g in grads):
            raise ValueError("groups cannot hold parameters with sparse gradients; use "
                             "sparse_as_dense=True")
        compressed = [self._compression.compress(g) for g in grads]
        pre, post = self._scales()
        tensors = [c for c, _ in compressed]
        detect = True if any(p in self._sparse_params for p in group) else self._sparse_detect
        handle = mpi_ops._grouped_allreduce_async(
            tensors, tensors, "optimizer.group.%d" % index, self.op, pre, post,
            self.process_set, detect, self.sparse_algorithm if detect else None)
        for p in group:
            self._handles.pop(p, None)
        self._handles[group] = (handle, compressed)
        self._group_ready[group] = set()

    # ---- public API ----
    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def synchronize(self):
        """Waits for every gradient's allreduce, starting those that have not started (unused
        parameters contribute zeros), and writes the averaged gradients into p.grad."""
        if not self.process_set.included():
            self._synchronized = True
            return
        launched = set()
        for key, (handle, _) in self._handles.items():
            if handle is not None:
                launched.update(key if isinstance(key, tuple) else (key,))
        pending_groups = []
        for p in sorted(self._requires_update - launched, key=lambda q: self._parameter_names[q]):
            if p in self._p_to_group:
                group = self._p_to_group[p][1]
                if group not in pending_groups:
                    pending_groups.append(group)
            else:
                self._handles[p] = self._allreduce_grad_async(p)
        for group in pending_groups:
            self._launch_group(group)
        for key, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                continue
            self._finish(key, handle, ctx)
        self._handles.clear()
        for group in self._group_ready:
            self._group_ready[group] = set()
        self._synchronized = True

    def _finish(self, key, handle, ctx):
        if ctx == "sparse":
            key.grad = mpi_ops.synchronize(handle)
            self._allreduce_delay[key] = self.backward_passes_per_step
            return
        if isinstance(ctx, topk.Pending):
            ctx.finish(key, handle, mpi_ops.synchronize)
            self._allreduce_delay[key] = self.backward_passes_per_step
            self._restore_sparse(key)
            return
        outputs = mpi_ops.synchronize(handle)
        params = key if isinstance(key, tuple) else (key,)
        contexts = ctx if isinstance(key, tuple) else [ctx]
        if not isinstance(outputs, list):
            outputs = [outputs]
        for p, out, (compressed, cctx) in zip(params, outputs, contexts):
            self._allreduce_delay[p] = self.backward_passes_per_step
            result = self._compression.decompress(out, cctx)
            if result is not p.grad:
                p.grad.copy_(result)
            self._restore_sparse(p)

    def _restore_sparse(self, p):
        """sparse_as_dense: a gradient that was sparse goes back to the optimizer sparse (as in
        Horovod; SparseAdam takes nothing else)."""
        if self.sparse_as_dense and p in self._sparse_grads and not p.grad.is_sparse:
            p.grad = p.grad.to_sparse(self._sparse_grads[p])

    def _drop_pending(self):
        """Forgets the allreduces in flight, as after an elastic reset: the runtime that ran them
        stopped, and the next backward pass starts its own."""
        self._handles.clear()
        for group in self._group_ready:
            self._group_ready[group] = set()
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        self._synchronized = False

    @contextmanager
    def skip_synchronize(self):
        """step() inside this context does not synchronize (after an explicit synchronize())."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn(_STEP_AFTER_SYNC)
            self.synchronize()
        self._synchronized = False
        return super().step(closure)

    def zero_grad(self, *args, **kwargs):
        if any(handle is not None for handle, _ in self._handles.values()):
            raise AssertionError(_ZERO_GRAD)
        return super().zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set, pipeline=None, sparse_algorithm=None,
                         sparse_params=None, sparse_detect=None, quantize_bits=0,
                         **pipeline_options):
    """Wraps a torch optimizer so that step() uses gradients averaged over every rank.

    named_parameters: model.named_parameters(), to name each allreduce. compression: on the
    wire (Compression.none / fp16 / bf16). backward_passes_per_step: local accumulation before
    each allreduce. op: Average (default), Sum, or Adasum (each rank's optimizer update, not its
    gradient, combined by Adasum: hvdsparse.torch.adasum_optimizer).
    gradient_predivide_factor: Average splits into prescale 1/f and postscale f. groups: an int
    (that many grouped allreduces) or a list of lists of parameters.

    Sparse gradients (nn.Embedding(sparse=True)) go through the runtime's sparse allreduce and
    come back as coalesced sparse tensors (compression and gradient_predivide_factor do not
    apply to them); sparse_as_dense=True allreduces them as dense tensors instead and hands
    them back sparse.
    sparse_algorithm: force the sparse algorithm ("dense", "allgather",
    "ssar_recursive_doubling", "ssar_split_allgather", "dsar_split_allgather", "zen"; None lets
    the cost model pick). Dense gradients that are mostly zero rows (nn.Embedding(sparse=False))
    can opt in: sparse_params=[names or parameters] or sparse_detect=True (every parameter) let
    the runtime count their non-zero rows and take the sparse path when cheaper; the result is
    the same (sparse_detect=False: never; None: HVDSPARSE_SPARSE_DETECT's default).

    compression=Compression.topk(ratio): each gradient's top ratio of entries (plus the residual
    of what earlier steps did not send: error feedback) goes through the sparse allreduce and
    the averaged dense result lands in p.grad; the residuals are optimizer state
    (state_dict(), load_state_dict(), broadcast_optimizer_state(); docs/compression.md). Not
    with groups or pipeline="dear". quantize_bits=2/4/8: the sparse allreduce sends the values of
    its gather phase after the full-precision reduce (DSAR, split-allgather, ZEN) stochastically
    quantized at that width, indices exact (0: full precision).

    pipeline="dear": reduce-scatter in backward, all-gather and update in the next forward
    (hvdsparse.torch.dear, docs/dear.md). Needs model=<the module>; options bucket_bytes,
    first_bucket_bytes, tune_bucket_size, tune_trials, tune_steps_per_trial, tune_skip,
    tune_warmup."""
    if op == Adasum:
        if pipeline is not None or is_topk(compression):
            raise ValueError("op=Adasum combines whole parameter updates: it cannot be combined "
                             "with pipeline='dear' or Compression.topk")
        from hvdsparse.torch import adasum_optimizer
        return adasum_optimizer.make(optimizer, named_parameters, compression,
                                     backward_passes_per_step, process_set)
    prescale, postscale = predivide_scales(op, gradient_predivide_factor)
    check_quantize_bits(quantize_bits)
    if is_topk(compression) and (pipeline is not None or groups is not None or num_groups):
        raise ValueError("Compression.topk sends each gradient through its own sparse "
                         "allreduce: it cannot be combined with groups or pipeline='dear'")
    if pipeline is not None:
        if pipeline != "dear":
            raise ValueError("pipeline must be None or 'dear', not %r" % (pipeline,))
        if (groups is not None or num_groups or sparse_as_dense or sparse_algorithm or
                sparse_params or sparse_detect):
            raise ValueError("pipeline='dear' plans its own buckets: groups, num_groups and "
                             "the sparse options do not apply")
        from hvdsparse.torch import dear
        return dear.make(optimizer, pipeline_options.pop("model", None), named_parameters,
                         compression, backward_passes_per_step, op, prescale, postscale,
                         process_set, **pipeline_options)
    if pipeline_options:
        raise TypeError("DistributedOptimizer() got unexpected keyword arguments %s (they are "
                        "options of pipeline='dear')" % ", ".join(sorted(pipeline_options)))
    if num_groups != 0:
        warnings.warn("Parameter `num_groups` has been replaced by `groups` and will be removed "
                      "in v0.23.0.", DeprecationWarning)
        if groups is None:
            groups = num_groups
    if groups is not None:
        if isinstance(groups, int):
            if groups <= 0:
                raise ValueError("groups must be a positive integer or a list of lists of "
                                 "torch.nn.Parameter")
        elif not (isinstance(groups, list) and
                  all(isinstance(g, list) and all(isinstance(p, torch.Tensor) for p in g)
                      for g in groups)):
            raise ValueError("groups must be a positive integer or a list of lists of "
                             "torch.nn.Parameter")
        if isinstance(groups, int) and groups == 0:
            groups = None
    cls = type(optimizer.__class__.__name__, (_DistributedMixin, optimizer.__class__), {})
    if sparse_algorithm is not None:
        _lib.check_sparse_algorithm(sparse_algorithm)
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, gradient_predivide_factor, groups, sparse_as_dense, process_set,
               sparse_algorithm, sparse_params, sparse_detect, quantize_bits)
