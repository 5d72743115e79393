"""`import horovod.torch as hvd` gives hvdsparse.torch (opt-in alias, see horovod/__init__.py).

The module object itself is replaced, so hvd and hvdsparse.torch share one state; its submodules
are registered under horovod.torch.* as well."""
import sys

import hvdsparse.torch as _impl
from hvdsparse.torch import compression, elastic, functions, mpi_ops, optimizer  # noqa: F401

for _sub in ("compression", "elastic", "functions", "mpi_ops", "optimizer"):
    sys.modules[__name__ + "." + _sub] = getattr(_impl, _sub)
sys.modules[__name__] = _impl
