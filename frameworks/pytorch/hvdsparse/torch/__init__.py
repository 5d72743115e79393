"""hvdsparse.torch: Horovod's PyTorch API over the hvdsparse runtime.

    import hvdsparse.torch as hvd
    hvd.init()
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)

Elastic training: hvdsparse.torch.elastic (hvd.elastic.run, TorchState, ElasticSampler). CUDA tensors raise NotImplementedError until the
NCCL backend exists.
"""
from hvdsparse.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401
from hvdsparse.common.process_sets import (ProcessSet, global_process_set,  # noqa: F401
                                           add_process_set, remove_process_set)
from hvdsparse.torch.compression import Compression  # noqa: F401
from hvdsparse.torch.functions import (allgather_object, broadcast_object,  # noqa: F401
                                       broadcast_optimizer_state, broadcast_parameters)
from hvdsparse.torch.mpi_ops import (  # noqa: F401
    Adasum, Average, Max, Min, Product, Sum,
    allgather, allgather_async, allreduce, allreduce_, allreduce_async, allreduce_async_,
    alltoall, alltoall_async, barrier, broadcast, broadcast_, broadcast_async, broadcast_async_,
    ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled,
    grouped_allgather, grouped_allgather_async, grouped_allreduce, grouped_allreduce_,
    grouped_allreduce_async, grouped_allreduce_async_, grouped_reducescatter,
    grouped_reducescatter_async, init, is_homogeneous, is_initialized, join, local_rank,
    local_size, mpi_built, mpi_enabled, mpi_threads_supported, nccl_built, poll, rank,
    reducescatter, reducescatter_async, rocm_built, shutdown, size, sparse_allreduce,
    sparse_allreduce_async, start_timeline, stop_timeline, synchronize)
from hvdsparse.torch.optimizer import DistributedOptimizer  # noqa: F401
from hvdsparse.torch.sync_batch_norm import SyncBatchNorm  # noqa: F401
from hvdsparse.torch import elastic  # noqa: F401,E402
