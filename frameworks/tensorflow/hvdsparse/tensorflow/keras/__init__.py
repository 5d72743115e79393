"""hvdsparse.tensorflow.keras: Horovod's Keras API (Keras 3, the tf.keras of TF >= 2.16).

    import hvdsparse.tensorflow.keras as hvd
    hvd.init()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.01 * hvd.size()))
    model.compile(optimizer=opt, loss=...)
    model.fit(..., callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                              hvd.callbacks.MetricAverageCallback()])
"""
import tensorflow as tf

from hvdsparse.tensorflow import mpi_ops as _ops
from hvdsparse.tensorflow.compression import Compression
from hvdsparse.tensorflow.gradient_tape import _check_options, allreduce_gradients
from hvdsparse.tensorflow.mpi_ops import (  # noqa: F401
    Adasum, Average, Max, Min, Product, Sum, ProcessSet, add_process_set, ccl_built,
    cross_rank, cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled, global_process_set,
    init, is_homogeneous, is_initialized, local_rank, local_size, mpi_built, mpi_enabled,
    mpi_threads_supported, nccl_built, rank, remove_process_set, rocm_built, shutdown, size,
    start_timeline, stop_timeline)
from hvdsparse.tensorflow.functions import (allgather_object, broadcast_object,  # noqa: F401
                                            broadcast_variables)
from hvdsparse.tensorflow.keras import callbacks  # noqa: F401

_WRAPPED = {}


def _distributed_class(cls, options):
    """A subclass of the optimizer's class whose apply()/apply_gradients() allreduce the
    gradients first. The class keeps the original's name (serialisation, summaries)."""
    def allreduce(self, grads, variables):
        return allreduce_gradients(list(grads), list(variables) if variables is not None
                                   else None, **self._hvds_options)

    namespace = {"_hvds_options": options, "_hvds_allreduce": allreduce,
                 "__module__": cls.__module__}
    if hasattr(cls, "apply") and hasattr(cls, "stateless_apply"):  # Keras 3
        def apply(self, grads, trainable_variables=None):
            grads = list(grads)
            variables = trainable_variables
            if variables is None and self.built:
                variables = self._trainable_variables
            grads = self._hvds_allreduce(grads, variables)
            return super(new_cls, self).apply(grads, trainable_variables)
        namespace["apply"] = apply
    else:  # Keras 2 style optimizers (tf_keras)
        def apply_gradients(self, grads_and_vars, *args, **kwargs):
            grads_and_vars = list(grads_and_vars)
            grads = self._hvds_allreduce([g for g, _ in grads_and_vars],
                                         [v for _, v in grads_and_vars])
            return super(new_cls, self).apply_gradients(
                list(zip(grads, [v for _, v in grads_and_vars])), *args, **kwargs)
        namespace["apply_gradients"] = apply_gradients
    new_cls = type(cls.__name__, (cls,), namespace)
    return new_cls


def DistributedOptimizer(optimizer, name=None, device_dense='', device_sparse='',
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True,
                         sparse_algorithm=None, sparse_detect=None, quantize_bits=0):
    """Returns a copy of a Keras optimizer (built from its config) whose gradients are
    allreduced over process_set before they are applied; works in model.fit's compiled train
    step and with optimizer.apply_gradients(). tf.IndexedSlices gradients go through the
    sparse allreduce unless sparse_as_dense (sparse_algorithm, sparse_detect: see
    allreduce_gradients; quantize_bits with Compression.topk: the sparse allreduce's quantized
    gather, docs/compression.md)."""
    _check_options(op, gradient_predivide_factor, num_groups, groups, sparse_algorithm,
                   quantize_bits)
    if backward_passes_per_step != 1:
        raise NotImplementedError("hvdsparse: backward_passes_per_step > 1 (local gradient "
                                  "aggregation) is not supported yet")
    options = dict(compression=compression or Compression.none,
                   sparse_as_dense=sparse_as_dense, op=op,
                   gradient_predivide_factor=gradient_predivide_factor,
                   num_groups=num_groups, groups=groups, process_set=process_set,
                   sparse_algorithm=sparse_algorithm, sparse_detect=sparse_detect,
                   quantize_bits=quantize_bits)
    cls = _distributed_class(optimizer.__class__, options)
    config = optimizer.get_config()
    if name is not None:
        config["name"] = name
    return cls.from_config(config)


def _wrap_in_place(optimizer, **kwargs):
    options = dict(compression=kwargs.get("compression") or Compression.none,
                   sparse_as_dense=False, op=Average, gradient_predivide_factor=1.0,
                   num_groups=0, groups=None, process_set=global_process_set)
    optimizer.__class__ = _distributed_class(optimizer.__class__, options)
    return optimizer


def load_model(filepath, custom_optimizers=None, custom_objects=None,
               compression=Compression.none, legacy_opts=False):
    """keras.models.load_model, with the restored optimizer (and its state) made distributed."""
    import keras
    objects = dict(custom_objects or {})
    for opt_cls in custom_optimizers or []:
        objects[opt_cls.__name__] = opt_cls
    model = keras.models.load_model(filepath, custom_objects=objects)
    if getattr(model, "optimizer", None) is not None:
        _wrap_in_place(model.optimizer, compression=compression)
    return model


def broadcast_global_variables(root_rank):
    raise NotImplementedError("broadcast_global_variables is a TF1 graph API; use "
                              "callbacks.BroadcastGlobalVariablesCallback or "
                              "hvd.broadcast_variables(model.variables, root_rank)")


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0,
              op=None, compression=Compression.none):
    return _ops.allreduce(tf.convert_to_tensor(value), average=average, name=name, op=op,
                          prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                          compression=compression)


def allgather(value, name=None):
    return _ops.allgather(tf.convert_to_tensor(value), name=name)


def broadcast(value, root_rank, name=None):
    return _ops.broadcast(tf.convert_to_tensor(value), root_rank, name=name)


def reducescatter(value, name=None, op=Average):
    return _ops.reducescatter(tf.convert_to_tensor(value), name=name, op=op)
