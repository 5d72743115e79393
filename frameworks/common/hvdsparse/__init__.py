"""hvdsparse: a Horovod-compatible communication runtime (Python side).

The framework bindings live in subpackages: ``hvdsparse.torch`` (frameworks/pytorch) and
``hvdsparse.tensorflow`` (frameworks/tensorflow). In a source tree each framework directory
contributes its own ``hvdsparse/`` folder, found through the path extension below; an installed
copy has them merged into one package. Importing this package loads nothing heavy.
"""
import pkgutil

__path__ = pkgutil.extend_path(__path__, __name__)

__version__ = "0.1.0"


def __getattr__(name):
    if name == "run":  # hvdsparse.run(func, num_proc=...), loaded on first use
        from hvdsparse.runner import run
        return run
    raise AttributeError("module 'hvdsparse' has no attribute %r" % name)
