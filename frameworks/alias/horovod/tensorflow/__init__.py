"""`import horovod.tensorflow as hvd` gives hvdsparse.tensorflow (opt-in alias, see
horovod/__init__.py). The module object is replaced, so both names share one state."""
import sys

import hvdsparse.tensorflow as _impl
from hvdsparse.tensorflow import (compression, elastic, functions, gradient_tape,  # noqa: F401
                                  mpi_ops, util)

for _sub in ("compression", "elastic", "functions", "gradient_tape", "mpi_ops", "util"):
    sys.modules[__name__ + "." + _sub] = getattr(_impl, _sub)
sys.modules[__name__] = _impl
