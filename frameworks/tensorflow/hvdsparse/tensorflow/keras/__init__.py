"""hvdsparse.tensorflow.keras: Horovod's Keras API, for whichever Keras tf.keras is (Keras 3, or
tf_keras with TF_USE_LEGACY_KERAS=1).

    import hvdsparse.tensorflow.keras as hvd
    hvd.init()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.01 * hvd.size()))
    model.compile(optimizer=opt, loss=...)
    model.fit(..., callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                              hvd.callbacks.MetricAverageCallback()])
"""
import tensorflow as tf

from hvdsparse.tensorflow import functions as _functions
from hvdsparse.tensorflow import mpi_ops as _ops
from hvdsparse.tensorflow.compression import Compression
from hvdsparse.tensorflow.gradient_tape import _check_options
from hvdsparse.tensorflow.mpi_ops import (  # noqa: F401
    Adasum, Average, Max, Min, Product, Sum, ProcessSet, add_process_set, ccl_built,
    cross_rank, cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled, global_process_set,
    init, is_homogeneous, is_initialized, local_rank, local_size, mpi_built, mpi_enabled,
    mpi_threads_supported, nccl_built, rank, remove_process_set, rocm_built, shutdown, size,
    start_timeline, stop_timeline)
from hvdsparse.tensorflow.functions import (allgather_object, broadcast_object,  # noqa: F401
                                            broadcast_variables)
from hvdsparse.tensorflow.keras import callbacks, elastic  # noqa: F401
from hvdsparse.tensorflow.keras.optimizer import distributed_class


def _options(compression, sparse_as_dense, op, gradient_predivide_factor, num_groups, groups,
             process_set, sparse_algorithm=None, sparse_detect=None, quantize_bits=0):
    return dict(compression=compression or Compression.none, sparse_as_dense=sparse_as_dense,
                op=op, gradient_predivide_factor=gradient_predivide_factor,
                num_groups=num_groups, groups=groups, process_set=process_set,
                sparse_algorithm=sparse_algorithm, sparse_detect=sparse_detect,
                quantize_bits=quantize_bits)


def DistributedOptimizer(optimizer, name=None, device_dense='', device_sparse='',
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True,
                         sparse_algorithm=None, sparse_detect=None, quantize_bits=0):
    """Returns a copy of a Keras optimizer (Keras 3 or tf_keras, built from its config) whose
    gradients are allreduced over process_set before they are applied; works in model.fit's
    train step, with minimize()/compute_gradients() and with apply_gradients().
    tf.IndexedSlices gradients go through the sparse allreduce unless sparse_as_dense
    (sparse_algorithm, sparse_detect: see allreduce_gradients; quantize_bits with
    Compression.topk: the sparse allreduce's quantized gather, docs/compression.md).

    backward_passes_per_step > 1 sums the gradients locally and allreduces and applies them
    every that many steps (divided by it with average_aggregated_gradients); the steps between
    only advance the optimizer's iterations. register_local_var(v) keeps v's gradient local
    (divided by the set size when scale_local_gradients)."""
    _check_options(op, gradient_predivide_factor, num_groups, groups, sparse_algorithm,
                   quantize_bits)
    options = _options(compression, sparse_as_dense, op, gradient_predivide_factor, num_groups,
                       groups, process_set, sparse_algorithm, sparse_detect, quantize_bits)
    cls = distributed_class(optimizer.__class__, options, backward_passes_per_step,
                            average_aggregated_gradients, scale_local_gradients)
    config = optimizer.get_config()
    if name is not None:
        config["name"] = name
    return cls.from_config(config)


def PartialDistributedOptimizer(optimizer, name=None, device_dense='', device_sparse='',
                                compression=Compression.none, sparse_as_dense=False,
                                gradient_predivide_factor=1.0, op=Average,
                                backward_passes_per_step=1, average_aggregated_gradients=False,
                                groups=None, process_set=global_process_set, local_layers=None,
                                scale_local_gradients=True):
    """A DistributedOptimizer whose local_layers' (a Keras layer or a list of them) trainable
    variables keep their local gradients (divided by the set size when
    scale_local_gradients)."""
    if op not in (Average, Sum):
        raise ValueError("op currently only supports Average and Sum")
    opt = DistributedOptimizer(
        optimizer, name=name, compression=compression, sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor, op=op,
        backward_passes_per_step=backward_passes_per_step,
        average_aggregated_gradients=average_aggregated_gradients, groups=groups,
        process_set=process_set, scale_local_gradients=scale_local_gradients)
    if local_layers is None:
        local_layers = []
    elif not isinstance(local_layers, (list, tuple)):
        local_layers = [local_layers]
    for layer in local_layers:
        if not hasattr(layer, "trainable_weights"):
            raise ValueError("All local layers must be Keras layers")
        for v in layer.trainable_weights:
            opt.register_local_var(v)
    return opt


def _wrap_in_place(optimizer, **kwargs):
    options = _options(kwargs.get("compression"), False, Average, 1.0, 0, None,
                       global_process_set)
    optimizer.__class__ = distributed_class(optimizer.__class__, options)
    return optimizer


def load_model(filepath, custom_optimizers=None, custom_objects=None,
               compression=Compression.none, legacy_opts=False):
    """tf.keras.models.load_model, with the restored optimizer (and its state) made
    distributed."""
    objects = dict(custom_objects or {})
    for opt_cls in custom_optimizers or []:
        objects[opt_cls.__name__] = opt_cls
    model = tf.keras.models.load_model(filepath, custom_objects=objects)
    if getattr(model, "optimizer", None) is not None:
        _wrap_in_place(model.optimizer, compression=compression)
    return model


def broadcast_global_variables(root_rank):
    """TF1 graphs, as Horovod's: assigns root_rank's global variables on every rank, run in the
    default session, else in Keras' own (tf_keras). Eagerly RuntimeError: use
    callbacks.BroadcastGlobalVariablesCallback or hvd.broadcast_variables."""
    op = _functions.broadcast_global_variables(root_rank)
    session = tf.compat.v1.get_default_session()
    if session is None:
        get_session = getattr(tf.compat.v1.keras.backend, "get_session", None)
        if get_session is None:
            raise RuntimeError("broadcast_global_variables needs a session: run it under "
                               "`with session.as_default():` (this Keras has no get_session)")
        session = get_session()
    return session.run(op)


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
