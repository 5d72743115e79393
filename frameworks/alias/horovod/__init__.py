"""Opt-in alias: `import horovod...` loads hvdsparse.

This directory is put on the workers' PYTHONPATH only by `hvdsparse run --horovod-alias`, so it
never shadows a real Horovod installation otherwise. horovod.common.* maps to hvdsparse.common.*.
"""
import importlib
import sys

import hvdsparse
from hvdsparse.common import basics as _basics, exceptions as _exceptions, \
    process_sets as _process_sets, util as _util

__version__ = hvdsparse.__version__

for _name, _module in (("common", importlib.import_module("hvdsparse.common")),
                       ("common.basics", _basics), ("common.exceptions", _exceptions),
                       ("common.process_sets", _process_sets), ("common.util", _util)):
    sys.modules.setdefault(__name__ + "." + _name, _module)
