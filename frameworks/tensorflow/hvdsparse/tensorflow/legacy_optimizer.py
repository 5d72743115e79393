"""DistributedOptimizer for a tf.compat.v1.train.Optimizer (TF1-style graphs run by a Session,
as Horovod's): compute_gradients() returns the wrapped optimizer's gradients allreduced over the
process set (a rank outside it keeps its own); with backward_passes_per_step N > 1 every N-th
pass, the sums of N passes (legacy_aggregation.py). Every other call is the wrapped
optimizer's."""
import tensorflow as tf

from hvdsparse.tensorflow.compression import Compression
from hvdsparse.tensorflow.gradient_tape import _check_options, allreduce_gradients
from hvdsparse.tensorflow.legacy_aggregation import LocalAggregation
from hvdsparse.tensorflow.mpi_ops import Average, global_process_set


class DistributedLegacyOptimizer(tf.compat.v1.train.Optimizer):
    def __init__(self, optimizer, name=None, use_locking=False, device_dense='',
                 device_sparse='', compression=Compression.none, sparse_as_dense=False,
                 backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                 average_aggregated_gradients=False, num_groups=0, groups=None,
                 process_set=global_process_set, scale_local_gradients=True):
        if int(backward_passes_per_step) < 1:
            raise ValueError("backward_passes_per_step must be at least 1, got %r"
                             % (backward_passes_per_step,))
        _check_options(op, gradient_predivide_factor, num_groups, groups)
        self._optimizer = optimizer
        self._reduce = dict(compression=compression, sparse_as_dense=sparse_as_dense, op=op,
                            gradient_predivide_factor=gradient_predivide_factor,
                            num_groups=num_groups, groups=groups, process_set=process_set)
        self._aggregation = None
        if backward_passes_per_step > 1:
            self._aggregation = LocalAggregation(int(backward_passes_per_step),
                                                 average_aggregated_gradients)
        super().__init__(name=name or "Distributed" + type(optimizer).__name__,
                         use_locking=use_locking)

    def compute_gradients(self, *args, **kwargs):
        pairs = list(self._optimizer.compute_gradients(*args, **kwargs))
        if self._aggregation is not None:
            return self._aggregation.compute(pairs, self._allreduce)
        return list(zip(self._allreduce([g for g, _ in pairs], [v for _, v in pairs]),
                        [v for _, v in pairs]))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        if self._aggregation is None:
            return self._optimizer.apply_gradients(grads_and_vars, global_step, name)
        grads_and_vars = list(grads_and_vars)
        return self._aggregation.apply(
            grads_and_vars,
            lambda: self._optimizer.apply_gradients(grads_and_vars, global_step, name),
            global_step)

    def _allreduce(self, grads, variables):
        return allreduce_gradients(grads, variables, **self._reduce)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)
