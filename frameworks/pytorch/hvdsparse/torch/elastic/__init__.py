"""hvdsparse.torch.elastic: Horovod's elastic training API for PyTorch.

    @hvd.elastic.run
    def train(state):
        for state.batch in range(state.batch, batches):
            ...
            state.commit()

    state = hvd.elastic.TorchState(model, optimizer, batch=0)
    train(state)

Launch with `hvdsparse run --min-np 2 --max-np 4 --host-discovery-script ./hosts.sh python ...`.
"""
from hvdsparse.common.elastic import ObjectState, State, reset_runtime, run_fn  # noqa: F401
from hvdsparse.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401
from hvdsparse.torch.elastic.sampler import ElasticSampler  # noqa: F401
from hvdsparse.torch.elastic.state import TorchState  # noqa: F401


def run(func):
    """Decorator: runs func(state, ...) and, when workers fail or join, rolls back (failure) or
    keeps (new hosts) the state, re-initialises with the launcher's new membership, syncs the state
    from rank 0 and calls func again."""
    return run_fn(func, reset_runtime)
