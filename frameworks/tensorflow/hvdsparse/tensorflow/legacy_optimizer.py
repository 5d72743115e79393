"""DistributedOptimizer for a tf.compat.v1.train.Optimizer (TF1-style graphs run by a Session,
as Horovod's): compute_gradients() returns the wrapped optimizer's gradients allreduced over the
process set (a rank outside it keeps its own); every other call is the wrapped optimizer's."""
import tensorflow as tf

from hvdsparse.tensorflow.compression import Compression
from hvdsparse.tensorflow.gradient_tape import _check_options, allreduce_gradients
from hvdsparse.tensorflow.mpi_ops import Average, global_process_set


class DistributedLegacyOptimizer(tf.compat.v1.train.Optimizer):
    def __init__(self, optimizer, name=None, use_locking=False, device_dense='',
                 device_sparse='', compression=Compression.none, sparse_as_dense=False,
                 backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                 average_aggregated_gradients=False, num_groups=0, groups=None,
                 process_set=global_process_set, scale_local_gradients=True):
        if backward_passes_per_step != 1:
            raise NotImplementedError("backward_passes_per_step > 1 is not supported for "
                                      "tf.compat.v1 optimizers yet; use a Keras optimizer")
        _check_options(op, gradient_predivide_factor, num_groups, groups)
        self._optimizer = optimizer
        self._reduce = dict(compression=compression, sparse_as_dense=sparse_as_dense, op=op,
                            gradient_predivide_factor=gradient_predivide_factor,
                            num_groups=num_groups, groups=groups, process_set=process_set)
        super().__init__(name=name or "Distributed" + type(optimizer).__name__,
                         use_locking=use_locking)

    def compute_gradients(self, *args, **kwargs):
        pairs = list(self._optimizer.compute_gradients(*args, **kwargs))
        grads = allreduce_gradients([g for g, _ in pairs], [v for _, v in pairs], **self._reduce)
        return [(g, v) for g, (_, v) in zip(grads, pairs)]

    def apply_gradients(self, *args, **kwargs):
        return self._optimizer.apply_gradients(*args, **kwargs)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)
