"""`import horovod.keras as hvd` gives hvdsparse.tensorflow.keras (opt-in alias): Horovod's
standalone-Keras module, for the Keras that ships with TensorFlow 2."""
import sys

import hvdsparse.tensorflow.keras as _impl
from hvdsparse.tensorflow.keras import callbacks, elastic  # noqa: F401

sys.modules[__name__ + ".callbacks"] = _impl.callbacks
sys.modules[__name__ + ".elastic"] = _impl.elastic
sys.modules[__name__] = _impl
