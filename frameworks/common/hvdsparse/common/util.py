"""Small helpers shared by the bindings: operation names and a thread-safe counter."""
import itertools
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
