"""Horovod's horovod.tensorflow.util names that scripts and Horovod's tests import."""
from hvdsparse.tensorflow.runtime_calls import _executing_eagerly  # noqa: F401
