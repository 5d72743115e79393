"""Model and optimizer state helpers: broadcast_parameters, broadcast_optimizer_state,
broadcast_object, allgather_object."""
import torch

from hvdsparse.common import objects
from hvdsparse.torch import mpi_ops
from hvdsparse.torch.mpi_ops import global_process_set


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Broadcasts parameters in place from root_rank (a global rank).

    params: a state_dict / dict of name -> tensor (sent in sorted order), or a list of tensors
    or of (name, tensor) pairs such as model.named_parameters()."""
    if isinstance(params, dict):
        items = sorted(params.items())
    elif isinstance(params, list) or hasattr(params, "__iter__"):
        items = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError("invalid params of type: %s" % type(params))
    handles = []
    for name, p in items:
        if not isinstance(p, torch.Tensor):
            continue
        target = p.data if isinstance(p, torch.nn.Parameter) else p
        handles.append(mpi_ops.broadcast_async_(target, root_rank, name, process_set))
    for h in handles:
        mpi_ops.synchronize(h)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Sends a picklable object (cloudpickle) from root_rank to every rank of the set."""
    return objects.broadcast_object(obj, root_rank, name, process_set, _broadcast_array)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Gathers a picklable object from every rank of the set; returns a list in rank order."""
    return objects.allgather_object(obj, name, process_set, _allgather_array)


def _broadcast_array(array, root_rank, name, process_set):
    return mpi_ops.broadcast_(torch.from_numpy(array), root_rank, name, process_set).numpy()


def _allgather_array(array, name, process_set):
    return mpi_ops.synchronize(mpi_ops.allgather_async(torch.from_numpy(array), name,
                                                       process_set)).numpy()


def _sparse_param_ids(optimizer, model):
    """Parameters whose gradients are sparse: every one under SparseAdam, else those of the
    model's nn.Embedding(sparse=True) modules."""
    if isinstance(optimizer, torch.optim.SparseAdam):
        return {id(p) for g in optimizer.param_groups for p in g["params"]}
    if model is None:
        return set()
    return {id(p) for m in model.modules()
            if isinstance(m, torch.nn.Embedding) and m.sparse for p in m.parameters()}


def _ensure_state(optimizer, model):
    """Creates the optimizer's state with one zero-gradient step, leaving parameters as they
    were (a weight-decay term would otherwise move them). As in Horovod, parameters that had no
    gradient keep the zero gradient (sparse where the gradient is sparse)."""
    sparse = _sparse_param_ids(optimizer, model)
    saved = []
    for group in optimizer.param_groups:
        for p in group["params"]:
            if not p.requires_grad or p in optimizer.state and optimizer.state[p]:
                continue
            saved.append((p, p.data.clone()))
            if p.grad is None:
                p.grad = torch.zeros_like(p.data)
                if id(p) in sparse:
                    p.grad = p.grad.to_sparse()
    if not saved:
        return
    if hasattr(optimizer, "skip_synchronize"):
        with optimizer.skip_synchronize():
            optimizer.step()
    else:
        optimizer.step()
    for p, data in saved:
        p.data.copy_(data)


def broadcast_optimizer_state(optimizer, root_rank, model=None, process_set=global_process_set):
    """Broadcasts an optimizer's state (tensors in place, options and scalars by object) from
    root_rank. Optimizers without state get it from one zero-gradient step first (model: the
    module, to tell sparse-embedding parameters, whose zero gradients are then sparse)."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    _ensure_state(optimizer, model)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    handles, scalars = [], {}
    for index, p in enumerate(params):
        for key, value in sorted(optimizer.state.get(p, {}).items(), key=lambda kv: str(kv[0])):
            if torch.is_tensor(value):
                handles.append(mpi_ops.broadcast_async_(
                    value, root_rank, "optimizer.state.%d.%s" % (index, key), process_set))
            else:
                scalars[(index, key)] = value
    # State kept outside optimizer.state (Compression.topk residuals): root_rank's everywhere.
    for name, value in getattr(optimizer, "_hvds_extra_state", list)():
        handles.append(mpi_ops.broadcast_async_(value, root_rank, name, process_set))
    options = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
    for h in handles:
        mpi_ops.synchronize(h)
    options, scalars = broadcast_object((options, scalars), root_rank,
                                        "optimizer.options", process_set)
    for group, opts in zip(optimizer.param_groups, options):
        group.update(opts)
    for (index, key), value in scalars.items():
        optimizer.state[params[index]][key] = value
