"""DeAR's DistributedOptimizer: reduce-scatter in backward, all-gather in the next forward.

Backward: each parameter's post-accumulate-grad hook copies the final gradient of the step into
its bucket; full buckets start their reduce-scatter (op Average: sum, then divide by size) in
strictly descending bucket order, so the launch order is the same on every rank.
step(): starts the reduce-scatters of buckets that are not full (unused parameters send their
p.grad or zeros), snapshots the hyper-parameters, waits for every reduce-scatter and starts
every all-gather of the reduced shards in ascending order (the order the next forward needs).
Forward: the pre-hook of a bucket's first module waits for that bucket's all-gather and runs
the user's optimizer on the bucket's parameters with the averaged gradient and the
hyper-parameters of step() -- once per step, guarded by a generation number.
flush(): applies every update still pending (reading parameters by hand, the end of
training). Forwards in any grad mode, model.state_dict() and optimizer.state_dict() need no
flush: under no_grad a module applies every bucket of its subtree."""
import time
from collections import Counter
from contextlib import contextmanager

import torch

from hvdsparse.common import _lib
from hvdsparse.torch import functions, mpi_ops
from hvdsparse.torch.dear import hooks
from hvdsparse.torch.dear.bucket import Bucket, Comm
from hvdsparse.torch.dear.planner import forward_plan, plan_buckets
from hvdsparse.torch.dear.tuner import BucketSizeTuner

_OVERFLOW = ("Gradients were computed more than backward_passes_per_step times before call to "
             "step(). Increase backward_passes_per_step to accumulate gradients locally.")
_STALE = ("pipeline='dear': parameter %r got a gradient while its update from the previous "
          "step was still pending: it was used in forward without any module that owns it "
          "running first (e.g. read as another module's attribute). Call optimizer.flush() "
          "before such a forward, or use the ordinary DistributedOptimizer.")


def _snapshot(groups):
    return [{k: (v.clone() if torch.is_tensor(v) else v) for k, v in g.items() if k != "params"}
            for g in groups]


class _DearMixin:
    """Placed in front of the wrapped optimizer's class in a class made for each instance."""

    def __init__(self, params, model, named, compression, backward_passes_per_step, op,
                 prescale, postscale, process_set, bucket_bytes, first_bucket_bytes, tuner):
        super().__init__(params)
        self._model = model
        self.process_set = process_set
        self.backward_passes_per_step = backward_passes_per_step
        self._params = [p for g in self.param_groups for p in g["params"] if p.requires_grad]
        self._names = {id(p): named[id(p)] for p in self._params}
        self._by_name = {self._names[id(p)]: p for p in self._params}
        owned = {id(p) for _, ps in hooks.owning_modules(model, self._names) for p in ps}
        orphans = sorted(self._names[i] for i in self._names if i not in owned)
        if orphans:
            raise ValueError("pipeline='dear' applies each update in a forward pre-hook of a "
                             "module owning the parameter; these parameters belong to no module "
                             "of `model`: %s" % ", ".join(orphans))
        self.launch_log = []          # ("rs"|"ag", bucket) of the last step, in launch order
        self._log = []
        self._comm = Comm(compression, op, prescale, postscale, process_set, self._log)
        self._bucket_bytes = int(bucket_bytes)
        self._first_bucket_bytes = first_bucket_bytes
        self._traced, self._traced_ids = [], set()
        self._order = None            # parameter names in forward order, from rank 0
        self._buckets = None
        self._slot_bucket = {}        # id(param) -> its Bucket
        self._appliers = {}           # id(param) -> module whose pre-hook applies it
        self._module_buckets = {}     # id(module) -> buckets it applies (grad enabled)
        self._subtree_buckets = {}    # id(module) -> buckets of its whole subtree (no grad)
        self._version = 0             # plan version: part of every operation name
        self._next_rs = -1            # highest bucket whose reduce-scatter has not started
        self._delay = {id(p): backward_passes_per_step for p in self._params}
        self._generation = 0
        self._hparams = None
        self._synchronized = False
        self._should_synchronize = True
        self._collective_seq = 0
        self.tuner = tuner
        self._hook_handles = hooks.install(self, model, self._params)

    # ---- planning ----
    def _root(self):
        ranks = self.process_set.ranks
        return ranks[0] if ranks else 0

    def _object_from_root(self, obj, what):
        self._collective_seq += 1
        return functions.broadcast_object(obj, self._root(),
                                          "dear.%s.%d" % (what, self._collective_seq),
                                          self.process_set)

    def _decide_order(self):
        """Rank 0's traced forward order, so that every rank plans identical buckets. Which
        module applies which parameter stays local (this rank's own trace)."""
        mine, self._appliers = forward_plan(self._model, self._traced, self._names)
        order = self._object_from_root(mine, "order")
        if sorted(order) != sorted(mine):
            raise ValueError("pipeline='dear': ranks disagree on the parameter names; rank %d "
                             "has %d, the root %d" % (mpi_ops.rank(), len(mine), len(order)))
        self._order = order

    def _plan(self, threshold):
        """(Re)builds the buckets; only at the quiescent point (nothing in flight)."""
        assert self._buckets is None or not any(b.rs or b.ag or b.filled for b in self._buckets)
        if self._order is None:
            self._decide_order()
        self._bucket_bytes = int(threshold)
        self._version += 1
        named = [(n, self._by_name[n]) for n in self._order]
        # Bucket 0 is reduce-scattered last and all-gathered first: neither half has compute
        # to hide behind, so by default it is a quarter of the others.
        first = self._first_bucket_bytes or max(1, self._bucket_bytes // 4)
        plans = plan_buckets(named, self._bucket_bytes, self.process_set.size(), first)
        self._buckets = [Bucket(p, self._version) for p in plans]
        self._slot_bucket = {id(s.param): b for b in self._buckets for s in b.plan.slots}
        # Grad enabled: a module applies the buckets of the parameters it owns or is the
        # applier of. No grad (evaluation, fused inference paths, the first pass of reentrant
        # checkpointing): it applies everything under it, so nothing it reads is stale.
        applied_by = {}
        for p in self._params:
            applied_by.setdefault(id(self._appliers[id(p)]), []).append(p)
        mine, under = {}, {}
        for m in self._model.modules():
            ps = [p for p in m.parameters(recurse=False) if id(p) in self._slot_bucket]
            ps += applied_by.get(id(m), [])
            if ps:
                mine[id(m)] = sorted({self._slot_bucket[id(p)].index for p in ps})
            sub = {self._slot_bucket[id(p)].index for p in m.parameters()
                   if id(p) in self._slot_bucket}
            if sub:
                under[id(m)] = sorted(sub)
        self._module_buckets, self._subtree_buckets = mine, under
        self._next_rs = len(self._buckets) - 1

    def bucket_plan(self):
        """[(dtype name, padded length, parameter names)] per bucket, in bucket order."""
        return [b.plan.signature() for b in self._buckets or []]

    @property
    def bucket_bytes(self):
        return self._bucket_bytes

    # ---- hooks ----
    def _forward_pre(self, module):
        if self._buckets is None:
            if id(module) not in self._traced_ids:
                self._traced_ids.add(id(module))
                self._traced.append(module)
            return
        table = self._module_buckets if torch.is_grad_enabled() else self._subtree_buckets
        due = [i for i in table.get(id(module), ()) if self._buckets[i].pending()]
        if due:
            self._apply(due, early=True)

    def _grad_ready(self, p):
        pid = id(p)
        left = self._delay[pid] - 1
        if left < 0:
            raise AssertionError(_OVERFLOW)
        self._delay[pid] = left
        if self._buckets is None:
            return                    # first step: step() plans and copies every gradient
        b = self._slot_bucket[pid]
        if b.pending():
            raise RuntimeError(_STALE % self._names[pid])
        if left > 0:
            return
        if p.grad.is_sparse:
            raise ValueError("pipeline='dear' needs dense gradients (%s is sparse)"
                             % self._names[pid])
        b.fill(p, p.grad)
        if b.full():
            self._launch_ready()

    def _launch_ready(self):
        """Reduce-scatters strictly in descending bucket order: a full bucket waits for the
        higher-numbered ones, so every rank issues the same sequence."""
        while self._next_rs >= 0 and self._buckets[self._next_rs].full():
            self._buckets[self._next_rs].launch_rs(self._comm)
            self._next_rs -= 1

    # ---- applying updates ----
    def _apply(self, due, early=False):
        """Waits for the all-gathers of the buckets in due and runs the optimizer once over
        them. early: also over every later bucket whose all-gather has already arrived. Those
        buckets' modules come later in the forward, so their update still lands before it is
        read; and one optimizer call instead of one per bucket saves most of what a call costs
        beyond its arithmetic."""
        take = [self._buckets[i] for i in due if self._buckets[i].pending()]
        if not take:
            return
        parts = [(b.plan.slots, b.wait_ag(self._comm)) for b in take]
        if early:  # what arrived while this rank waited, too
            parts += [(b.plan.slots, b.wait_ag(self._comm))
                      for b in self._buckets[max(b.index for b in take) + 1:]
                      if b.pending() and b.all_gathered(self._comm)]
        self._step_on(parts, self._hparams)

    def _step_on(self, parts, hparams):
        """Runs the wrapped optimizer's own step() on just the parameters of parts, pairs of
        (slots, flat averaged gradient), with the averaged gradients (views of flat) and the
        hyper-parameters snapshotted at step(). p.grad and the user's param_groups are left as
        they were."""
        ids, saved = set(), []
        for slots, flat in parts:
            for s in slots:
                ids.add(id(s.param))
                saved.append((s.param, s.param.grad))
                s.param.grad = flat[s.offset:s.offset + s.numel].view_as(s.param)
        restricted = []
        for g, hp in zip(self.param_groups, hparams):
            sub = [p for p in g["params"] if id(p) in ids]
            if sub:
                d = dict(g)
                d.update(hp)
                d["params"] = sub
                restricted.append(d)
        groups = self.param_groups
        self.param_groups = restricted
        try:
            super().step()
        finally:
            self.param_groups = groups
            for p, g in saved:
                p.grad = g

    def flush(self):
        """Applies every pending update now, in bucket order. Call it before reading or saving
        parameters by hand and at the end of training; forwards (any grad mode),
        model.state_dict() and optimizer.state_dict() need none. Rank-local: it only waits for
        all-gathers that every rank started in step()."""
        self._apply(range(len(self._buckets or ())))

    # ---- step ----
    def _check_params(self):
        n = sum(1 for g in self.param_groups for p in g["params"] if p.requires_grad)
        if n != len(self._params):
            raise ValueError("pipeline='dear' plans buckets once: parameters cannot be added "
                             "(add_param_group) or change requires_grad after construction")

    def _reduce(self):
        """Starts the remaining reduce-scatters, applies leftovers of the previous step,
        snapshots the hyper-parameters and waits; returns the shards by bucket index."""
        self._check_params()
        if self._buckets is None:
            self._plan(self._bucket_bytes)
        while self._next_rs >= 0:
            b = self._buckets[self._next_rs]
            b.fill_missing()
            b.launch_rs(self._comm)
            self._next_rs -= 1
        self.flush()                  # updates of modules that did not run in this forward
        self._hparams = _snapshot(self.param_groups)
        shards = {b.index: b.wait_rs(self._comm) for b in reversed(self._buckets)}
        self._next_rs = len(self._buckets) - 1
        for pid in self._delay:
            self._delay[pid] = self.backward_passes_per_step
        return shards

    def _gather(self, shards):
        self._generation += 1
        for b in self._buckets:       # ascending: the next forward needs bucket 0 first
            b.launch_ag(self._comm, shards[b.index], self._generation)
        self.launch_log = list(self._log)
        del self._log[:]

    def step(self, closure=None):
        """Finishes this step's reduce-scatters and starts the all-gathers; the update itself
        runs in the next forward (or flush()). With a closure, it is called first."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self._synchronized or not self._should_synchronize:
            self.flush()
            super().step()            # synchronize() already averaged p.grad: plain step
            self._synchronized = False
            return loss
        self._gather(self._reduce())
        self._tune()
        return loss

    def synchronize(self):
        """Horovod's synchronize(): averages every gradient into p.grad now (no pipelining for
        this step), e.g. to clip gradients before `with skip_synchronize(): step()`."""
        shards = self._reduce()
        self._gather(shards)
        for b in self._buckets:
            flat = b.wait_ag(self._comm)
            for s in b.plan.slots:
                avg = flat[s.offset:s.offset + s.numel].view_as(s.param)
                if s.param.grad is None:
                    s.param.grad = avg.clone()
                else:
                    s.param.grad.copy_(avg)
        self._synchronized = True

    @contextmanager
    def skip_synchronize(self):
        """step() inside this context does not synchronize (after an explicit synchronize())."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for pid in self._delay:
            self._delay[pid] = passes

    def state_dict(self, *args, **kwargs):
        self.flush()
        return super().state_dict(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        self.flush()
        return super().load_state_dict(*args, **kwargs)

    # ---- tuning ----
    def _tune(self):
        """At trial boundaries (the same steps on every rank): rank 0 picks the next
        threshold, every rank receives it, flushes and rebuilds the buckets."""
        t = self.tuner
        if t is None or not t.on_step(time.perf_counter()):
            return
        mine = t.decide() if mpi_ops.rank() == self._root() else None
        threshold = int(self._object_from_root(mine, "tune"))
        if threshold != self._bucket_bytes:
            self.flush()
            self._plan(threshold)
        t.apply(threshold, time.perf_counter())


def make(optimizer, model, named_parameters, compression, backward_passes_per_step, op,
         prescale, postscale, process_set, bucket_bytes=25 << 20, first_bucket_bytes=None,
         tune_bucket_size=False, tune_trials=10, tune_steps_per_trial=5, tune_skip=2,
         tune_warmup=5):
    """Builds the DeAR optimizer (see hvdsparse.torch.DistributedOptimizer)."""
    if model is None or not isinstance(model, torch.nn.Module):
        raise ValueError("pipeline='dear' needs model=<the torch.nn.Module being trained>: its "
                         "forward pre-hooks apply the updates")
    if named_parameters is None:
        named_parameters = model.named_parameters()
    named_parameters = list(named_parameters)
    if any(not isinstance(item, tuple) for item in named_parameters):
        raise ValueError("named_parameters should be a sequence of tuples (name, parameter), "
                         "usually produced by model.named_parameters().")
    counts = Counter(name for name, _ in named_parameters)
    dups = sorted(n for n, c in counts.items() if c > 1)
    if dups:
        raise ValueError("Parameter names in named_parameters must be unique. Found "
                         "duplicates: %s" % ", ".join(dups))
    named = {id(p): name for name, p in named_parameters}
    unnamed = [p for g in optimizer.param_groups for p in g["params"] if id(p) not in named]
    if unnamed:
        raise ValueError("named_parameters was specified, but one or more model parameters "
                         "were not named.")
    if bucket_bytes <= 0 or (first_bucket_bytes is not None and first_bucket_bytes <= 0):
        raise ValueError("bucket_bytes and first_bucket_bytes must be positive")
    tuner = None
    if tune_bucket_size:
        tuner = BucketSizeTuner(bucket_bytes, tune_trials, tune_steps_per_trial, tune_skip,
                                tune_warmup)
    # The overlap needs the coordinator to get a core as soon as a bucket's data arrives, while
    # the next forward keeps the cores busy: DeAR's default is HVDSPARSE_COORDINATOR_PRIORITY=auto
    # (the environment's setting wins; docs/dear.md).
    if _lib.has("hvds_prefer_coordinator_priority"):
        _lib.lib().hvds_prefer_coordinator_priority(b"auto")
    cls = type(optimizer.__class__.__name__, (_DearMixin, optimizer.__class__), {})
    return cls(optimizer.param_groups, model, named, compression, backward_passes_per_step, op,
               prescale, postscale, process_set, bucket_bytes, first_bucket_bytes, tuner)
