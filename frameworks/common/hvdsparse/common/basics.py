"""Lifecycle and queries shared by the framework bindings (Horovod's common/basics.py API)."""
import atexit
import ctypes
import os
import sys
import threading

from hvdsparse.common import _lib
from hvdsparse.common.errors import NOT_INITIALIZED, call_error

_state_lock = threading.RLock()
_dynamic = False
_reset_hooks = []  # called after init and after shutdown: fn(event) with event "init"/"shutdown"


def register_reset_hook(fn):
    """Lets a binding drop per-run state (handle maps, name counters) at init and shutdown. The
    "shutdown" event comes once the runtime has stopped: operations still in flight until then
    read their inputs and write their outputs, which the binding keeps alive till that point."""
    if fn not in _reset_hooks:
        _reset_hooks.append(fn)


def check(rc, what=""):
    """Raises the mapped exception for rc != HVDS_SUCCESS, with hvds_last_error()'s message."""
    if rc != _lib.SUCCESS:
        msg = _lib.last_error() or _lib.result_str(rc)
        raise call_error(rc, "%s: %s" % (what, msg) if what and what not in msg else msg)


def _truthy(value):
    return value is not None and value.strip().lower() not in ("", "0", "false", "no", "off")


def init(comm=None, process_sets=None):
    """Starts the runtime (idempotent). process_sets: a list of ProcessSet (static sets, the same
    on every rank), or "dynamic" to allow add_process_set()/remove_process_set() later."""
    global _dynamic
    from hvdsparse.common import process_sets as ps_mod
    if comm is not None and not (isinstance(comm, (list, tuple)) and len(comm) == 0):
        raise NotImplementedError(
            "hvdsparse runs over Gloo: init(comm=...) with an MPI communicator or a rank list is "
            "not supported; use process_sets instead.")
    with _state_lock:
        if is_initialized():
            return
        static = []
        if isinstance(process_sets, str):
            if process_sets != "dynamic":
                raise ValueError("process_sets must be a list of ProcessSet or \"dynamic\"")
            _dynamic = True
        else:
            _dynamic = False
            static = [ps for ps in (process_sets or []) if ps is not ps_mod.global_process_set]
        _dynamic = _dynamic or _truthy(os.environ.get("HVDSPARSE_DYNAMIC_PROCESS_SETS")) or \
            _truthy(os.environ.get("HOROVOD_DYNAMIC_PROCESS_SETS"))
        lib = _lib.lib()
        if static:
            flat = [r for ps in static for r in ps.ranks]
            ranks = (ctypes.c_int32 * max(1, len(flat)))(*flat)
            sizes = (ctypes.c_int32 * len(static))(*[len(ps.ranks) for ps in static])
            check(lib.hvds_init_with_process_sets(ranks, sizes, len(static)), "init")
        else:
            check(lib.hvds_init(), "init")
        ps_mod._after_init(static)
        for hook in list(_reset_hooks):
            hook("init")


def shutdown():
    """Stops the runtime; pending operations fail. Safe to call twice and before init. The
    bindings drop what pending operations hold (inputs, outputs) only after the runtime has
    stopped: its thread may be copying into them until then."""
    with _state_lock:
        if _lib._lib is None or not is_initialized():
            return
        _lib.lib().hvds_shutdown()
        from hvdsparse.common import process_sets as ps_mod
        ps_mod._before_shutdown()
        for hook in list(_reset_hooks):
            hook("shutdown")


def exit_reason():
    """Why the interpreter is ending, for the peers' errors: the uncaught exception that ends
    the script ("after an uncaught RuntimeError: ..."), or None for a plain end."""
    exc = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if exc is None or isinstance(exc, SystemExit):
        return None
    text = ("%s: %s" % (type(exc).__name__, exc)) if str(exc) else type(exc).__name__
    text = " ".join(text.split())
    return "after an uncaught %s" % (text if len(text) <= 300 else text[:297] + "...")


def _shutdown_at_exit():
    """atexit: the runtime stops with the script; an uncaught exception is named to the peers
    whose operations the stop fails."""
    with _state_lock:
        if _lib._lib is None or not is_initialized():
            return
        reason = exit_reason()
        if reason and _lib.has("hvds_set_shutdown_reason"):
            _lib.lib().hvds_set_shutdown_reason(reason.encode("utf-8", "replace"))
    shutdown()


atexit.register(_shutdown_at_exit)


def is_initialized():
    return bool(_lib.lib().hvds_is_initialized())


def require_init():
    """Raises Horovod's ValueError unless the runtime is running."""
    if not is_initialized():
        raise ValueError(NOT_INITIALIZED)


def dynamic_process_sets():
    return _dynamic


def _query(fn):
    value = fn()
    if value < 0:
        raise ValueError(NOT_INITIALIZED)
    return value


def rank():
    return _query(_lib.lib().hvds_rank)


def size():
    return _query(_lib.lib().hvds_size)


def local_rank():
    return _query(_lib.lib().hvds_local_rank)


def local_size():
    return _query(_lib.lib().hvds_local_size)


def cross_rank():
    return _query(_lib.lib().hvds_cross_rank)


def cross_size():
    return _query(_lib.lib().hvds_cross_size)


def is_homogeneous():
    return bool(_query(_lib.lib().hvds_is_homogeneous))


def mpi_threads_supported():
    raise ValueError("Horovod MPI is not enabled: hvdsparse runs over Gloo.")


def mpi_enabled():
    return False


def mpi_built():
    return bool(_lib.lib().hvds_mpi_built())


def gloo_enabled():
    return True


def gloo_built():
    return bool(_lib.lib().hvds_gloo_built())


def nccl_built():
    """The NCCL version code (e.g. 22703) when the NCCL backend is built, else 0."""
    return int(_lib.lib().hvds_nccl_built())


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return bool(_lib.lib().hvds_cuda_built())


def rocm_built():
    return False


def start_timeline(file_path, mark_cycles=False):
    """Starts writing the Chrome-trace timeline (rank 0 writes it)."""
    check(_lib.lib().hvds_start_timeline(str(file_path).encode(), 1 if mark_cycles else 0),
          "start_timeline")


def stop_timeline():
    check(_lib.lib().hvds_stop_timeline(), "stop_timeline")
