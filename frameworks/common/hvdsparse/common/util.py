"""Small helpers shared by the bindings: operation names and a thread-safe counter; and, as
horovod.common.util under the alias, the helpers of Horovod's module of that name."""
import contextlib
import functools
import importlib
import itertools
import os
import threading

_lock = threading.Lock()
_counters = {}


def op_name(kind, name, process_set_id=0):
    """Horovod's naming: "<kind>.<name>", or "<kind>.noname.<n>" for unnamed operations.

    n counts per kind and per process set, so the members of a set agree on the names of its
    unnamed operations whatever other sets do; within a set, unnamed operations must be issued
    in the same order on every member, as in Horovod."""
    if name is not None:
        return "%s.%s" % (kind, name)
    with _lock:
        counter = _counters.setdefault((kind, process_set_id), itertools.count(1))
        n = next(counter)
    if process_set_id:
        return "%s.noname.ps%d.%d" % (kind, process_set_id, n)
    return "%s.noname.%d" % (kind, n)


def reset_counters():
    """Restarts the unnamed-operation counters (at init, so every rank agrees again)."""
    with _lock:
        _counters.clear()


# ---- Horovod's horovod.common.util helpers, which scripts and Horovod's tests import ----------

def _cache(fn):
    """Memoises fn by its positional arguments."""
    return functools.lru_cache(maxsize=None)(fn)


def extension_available(ext_base_name, verbose=False):
    """Whether the binding for ext_base_name ("tensorflow", "torch") imports here."""
    module = {"tensorflow": "hvdsparse.tensorflow", "torch": "hvdsparse.torch"}.get(ext_base_name)
    if module is None:
        return False
    try:
        importlib.import_module(module)
        return True
    except ImportError:
        if verbose:
            raise
        return False


def gpu_available(ext_base_name, verbose=False):
    """Whether GPU collectives run here: not yet (docs/gpu.md)."""
    return False


def gloo_built(verbose=False):
    return True


def mpi_built(verbose=False):
    return False


def nccl_built(verbose=False):
    from hvdsparse.common import basics
    return basics.nccl_built()


def ddl_built(verbose=False):
    return False


def ccl_built(verbose=False):
    return False


@contextlib.contextmanager
def env(**kwargs):
    """Sets the given environment variables (None: leave alone) and restores them on exit."""
    given = {k: v for k, v in kwargs.items() if v is not None}
    saved = {k: os.environ.get(k) for k in given}
    os.environ.update(given)
    try:
        yield
    finally:
        for k, old in saved.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old


def num_rank_is_power_2(num_rank):
    return num_rank > 0 and num_rank & (num_rank - 1) == 0


def split_list(items, n):
    """items cut into n runs whose lengths differ by one at most, the longer ones first."""
    size, extra = divmod(len(items), n)
    bounds = [i * size + min(i, extra) for i in range(n + 1)]
    return [items[bounds[i]:bounds[i + 1]] for i in range(n)]


def is_iterable(x):
    try:
        iter(x)
    except TypeError:
        return False
    return True


def is_version_greater_equal_than(ver, target):
    """ver >= target, both version strings; target as major.minor.patch."""
    if not isinstance(ver, str) or not isinstance(target, str):
        raise ValueError("versions must be strings, got %r and %r" % (ver, target))
    if len(target.split(".")) != 3:
        raise ValueError("the target version must read major.minor.patch, got %r" % target)
    from packaging import version
    return version.parse(ver) >= version.parse(target)
