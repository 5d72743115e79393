"""hvdsparse.tensorflow: Horovod's TensorFlow 2 API over the hvdsparse runtime.

    import hvdsparse.tensorflow as hvd
    hvd.init()
    tape = hvd.DistributedGradientTape(tape)
    hvd.broadcast_variables(model.variables, root_rank=0)

Not compiled against TensorFlow: collectives copy tensors to host numpy buffers and call the C
library through ctypes; inside tf.function they run as tf.py_function ops. GPU tensors are
copied to the host, except in the dense collectives, which see them in place through DLPack
when the device library loads (dlpack_views.py). TF1 graphs run by a
tf.compat.v1.Session work too (graph_mode.py), with broadcast_global_variables,
BroadcastGlobalVariablesHook and DistributedOptimizer around a tf.compat.v1.train.Optimizer
(backward_passes_per_step included). hvd.elastic: Horovod's elastic API
(TensorFlow 2, eager; docs/elastic.md).
"""
from hvdsparse.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401
from hvdsparse.tensorflow import elastic, graph_mode  # noqa: F401
from hvdsparse.tensorflow.compression import Compression  # noqa: F401
from hvdsparse.tensorflow.functions import (allgather_object, broadcast_object,  # noqa: F401
                                            broadcast_object_fn, broadcast_variables,
                                            broadcast_global_variables)
from hvdsparse.tensorflow.gradient_tape import (DistributedGradientTape,  # noqa: F401
                                                PartialDistributedGradientTape)
from hvdsparse.tensorflow.session_hooks import BroadcastGlobalVariablesHook  # noqa: F401
from hvdsparse.tensorflow.mpi_ops import (  # noqa: F401
    Adasum, Average, Max, Min, Product, Sum,
    HorovodAbortedError, HorovodInvalidArgumentError, HorovodPreconditionError,
    ProcessSet, add_process_set, global_process_set, remove_process_set,
    allgather, allreduce, alltoall, barrier, broadcast, broadcast_, ccl_built, cross_rank,
    cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled, grouped_allgather,
    grouped_allreduce, grouped_reducescatter, init, is_homogeneous, is_initialized, join,
    local_rank, local_rank_op, local_size, local_size_op, mpi_built, mpi_enabled,
    mpi_threads_supported, nccl_built, process_set_included_op, rank, rank_op, reducescatter,
    rocm_built, shutdown, size, size_op, start_timeline, stop_timeline, _executing_eagerly)

from hvdsparse.tensorflow.late_names import DistributedOptimizer, __getattr__  # noqa: F401
