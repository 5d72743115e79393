"""One bucket's buffer and its trip through the runtime.

State machine for one step (generation) of one bucket:

    EMPTY --fill()--> FILLING --(all slots filled)--> full --launch_rs()--> RS_ISSUED
      --wait_rs() in step()--> RS_DONE --launch_ag()--> AG_ISSUED
      --wait_ag() in the first forward pre-hook (or flush)--> APPLIED (== EMPTY)

The reduce-scatter half and the all-gather half are separate fields: the buffer can be filling
for step k while the all-gather of step k-1 is still unapplied (the bucket's modules did not
run in this forward). The buffer is the reduce-scatter's input and is not written again until
step() has waited for it; the all-gather's output is a fresh tensor from the runtime."""
import torch

from hvdsparse.torch import mpi_ops


class Comm:
    """How buckets talk to the runtime: compression, reduce op and scaling, process set. Both
    halves go through the runtime's ordered fast lane: the launch order is fixed by the plan on
    every rank (reduce-scatters in descending, all-gathers in ascending bucket index), so they
    skip per-tensor negotiation, and the lane's fingerprint check catches a rank that differs."""

    def __init__(self, compression, op, prescale, postscale, process_set, log):
        self.compression = compression
        self.op = op
        self.prescale = prescale
        self.postscale = postscale
        self.process_set = process_set
        self.log = log      # list that receives ("rs" | "ag", bucket index) in launch order

    def reducescatter(self, index, tensor, name):
        wire, ctx = self.compression.compress(tensor)
        h = mpi_ops.reducescatter_async(wire, name=name, op=self.op,
                                        process_set=self.process_set,
                                        prescale_factor=self.prescale,
                                        postscale_factor=self.postscale, ordered=True)
        self.log.append(("rs", index))
        return h, ctx

    def allgather(self, index, tensor, name):
        wire, ctx = self.compression.compress(tensor)
        h = mpi_ops.allgather_async(wire, name=name, process_set=self.process_set, ordered=True)
        self.log.append(("ag", index))
        return h, ctx

    def done(self, pending):
        """True when the operation behind pending has finished (wait() will not block)."""
        return mpi_ops.poll(pending[0])

    def wait(self, pending):
        handle, ctx = pending
        return self.compression.decompress(mpi_ops.synchronize(handle), ctx)


class Bucket:
    """Flat buffer plus state for one BucketPlan. Not thread-safe: the owner calls it from the
    training thread (forward pre-hooks, autograd hooks of a CPU backward, step)."""

    def __init__(self, plan, version):
        self.plan = plan
        self.index = plan.index
        # Zero-filled once: the pad tail is never written, so it always reduces to zero.
        self.buffer = torch.zeros(plan.padded, dtype=plan.dtype, device=plan.device)
        self.by_param = {id(s.param): s for s in plan.slots}
        self.filled = set()        # ids of the parameters copied in for this step
        self.rs = None             # (handle, ctx) while RS_ISSUED
        self.ag = None             # (handle, ctx) while AG_ISSUED
        self.generation = 0        # step whose update the all-gather carries
        self.applied = 0           # last generation applied
        self._rs_name = "dear.v%d.rs.%d" % (version, plan.index)
        self._ag_name = "dear.v%d.ag.%d" % (version, plan.index)

    # ---- filling ----
    def fill(self, param, grad):
        """Copies a parameter's final (accumulated) gradient into its slot."""
        s = self.by_param[id(param)]
        self.buffer[s.offset:s.offset + s.numel].copy_(grad.reshape(-1))
        self.filled.add(id(param))

    def fill_missing(self):
        """Slots not filled by a hook (unused parameters, or a step without hooks): p.grad as
        it is, or zeros, as the ordinary optimizer sends for an unused parameter."""
        for s in self.plan.slots:
            if id(s.param) in self.filled:
                continue
            view = self.buffer[s.offset:s.offset + s.numel]
            g = s.param.grad
            if g is None:
                view.zero_()
            else:
                view.copy_(g.to_dense().reshape(-1) if g.is_sparse else g.reshape(-1))
            self.filled.add(id(s.param))

    def full(self):
        return len(self.filled) == len(self.plan.slots)

    def pending(self):
        """True while an all-gathered update waits to be applied."""
        return self.ag is not None

    # ---- communication ----
    def launch_rs(self, comm):
        assert self.rs is None and self.full()
        self.rs = comm.reducescatter(self.index, self.buffer, self._rs_name)

    def wait_rs(self, comm):
        """Blocks until this bucket's reduce-scatter is done; returns this rank's shard."""
        shard = comm.wait(self.rs)
        self.rs = None
        self.filled = set()
        return shard

    def launch_ag(self, comm, shard, generation):
        assert self.ag is None
        self.ag = comm.allgather(self.index, shard, self._ag_name)
        self.generation = generation

    def all_gathered(self, comm):
        """True when the all-gather has arrived (wait_ag() will not block)."""
        return self.ag is not None and comm.done(self.ag)

    def wait_ag(self, comm):
        """Blocks until the all-gather is done; returns the flat reduced gradient (padded)."""
        flat = comm.wait(self.ag)
        self.ag = None
        self.applied = self.generation
        return flat
