"""Names of hvdsparse.tensorflow that load Keras, imported only when a script asks for them:
the package's DistributedOptimizer and SyncBatchNormalization (through the module's
__getattr__, PEP 562)."""


def DistributedOptimizer(optimizer, *args, **kwargs):
    """A tf.compat.v1.train.Optimizer: legacy_optimizer.DistributedLegacyOptimizer; a Keras
    optimizer: hvdsparse.tensorflow.keras.DistributedOptimizer."""
    import tensorflow as tf
    if isinstance(optimizer, tf.compat.v1.train.Optimizer):
        from hvdsparse.tensorflow.legacy_optimizer import DistributedLegacyOptimizer
        return DistributedLegacyOptimizer(optimizer, *args, **kwargs)
    from hvdsparse.tensorflow.keras import DistributedOptimizer as _keras_opt
    return _keras_opt(optimizer, *args, **kwargs)


def __getattr__(name):
    # SyncBatchNormalization derives from tf.keras's layer: Keras loads only when it is asked for.
    if name == "SyncBatchNormalization":
        from hvdsparse.tensorflow.sync_batch_norm import SyncBatchNormalization
        return SyncBatchNormalization
    raise AttributeError("module %r has no attribute %r" % ("hvdsparse.tensorflow", name))
