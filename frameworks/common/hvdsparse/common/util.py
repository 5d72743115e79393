"""Small helpers shared by the bindings: operation names and a thread-safe counter."""
import itertools
import threading

_lock = threading.Lock()
_counters = {}


def op_name(kind, name):
    """Horovod's naming: "<kind>.<name>", or "<kind>.noname.<n>" with a per-kind counter.

    Unnamed operations must be issued in the same order on every rank, as in Horovod."""
    if name is not None:
        return "%s.%s" % (kind, name)
    with _lock:
        counter = _counters.setdefault(kind, itertools.count(1))
        return "%s.noname.%d" % (kind, next(counter))


def reset_counters():
    """Restarts the unnamed-operation counters (at init, so every rank agrees again)."""
    with _lock:
        _counters.clear()
