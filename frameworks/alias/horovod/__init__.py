"""Opt-in alias: `import horovod...` loads hvdsparse.

This directory is put on the workers' PYTHONPATH only by `hvdsparse run --horovod-alias`, so it
never shadows a real Horovod installation otherwise. horovod.common.* maps to hvdsparse.common.*;
horovod.run() is hvdsparse.run() (horovod/runner/).
"""
import importlib
import importlib.abc
import importlib.util
import sys

import hvdsparse
from hvdsparse.common import basics as _basics, exceptions as _exceptions, \
    process_sets as _process_sets, util as _util
import hvdsparse.runner

__version__ = hvdsparse.__version__
HVDSPARSE_ALIAS = True  # run() passes the alias on to its workers when it sees this
run = hvdsparse.runner.run

for _name, _module in (("common", importlib.import_module("hvdsparse.common")),
                       ("common.basics", _basics), ("common.exceptions", _exceptions),
                       ("common.process_sets", _process_sets), ("common.util", _util)):
    sys.modules.setdefault(__name__ + "." + _name, _module)


class _ReplacedPackageSubmodules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """horovod.tensorflow, horovod.torch and horovod.keras replace themselves with hvdsparse's
    modules, whose __path__ would load a submodule (horovod.tensorflow.keras) a second time
    under the horovod name, a copy with its own classes. This finder gives the hvdsparse
    module itself."""

    def find_spec(self, fullname, path=None, target=None):
        parent, _, child = fullname.rpartition(".")
        real_parent = getattr(sys.modules.get(parent), "__name__", "")
        if not parent.startswith(__name__ + ".") or not real_parent.startswith("hvdsparse."):
            return None
        real = real_parent + "." + child
        if importlib.util.find_spec(real) is None:
            return None
        spec = importlib.util.spec_from_loader(fullname, self)
        spec.loader_state = real
        return spec

    def create_module(self, spec):
        return importlib.import_module(spec.loader_state)

    def exec_module(self, module):
        pass


if not any(isinstance(f, _ReplacedPackageSubmodules) for f in sys.meta_path):
    sys.meta_path.insert(0, _ReplacedPackageSubmodules())
