"""What the running job is, for the modules beneath the lifecycle (process sets, the bindings):
whether the runtime runs, this process's place in the job, the communicator and process-set
mode init was given, and the error check every C call goes through. basics.init() and
basics.shutdown() set it; basics re-exports all of it as Horovod's API."""
from hvdsparse.common import _lib
from hvdsparse.common.errors import NOT_INITIALIZED, call_error

_dynamic = False  # add_process_set()/remove_process_set() allowed in the running job
_comm = None  # the MPI communicator of init(comm=...) while that job runs


def started(dynamic, comm):
    """Records what init was given, once the runtime runs."""
    global _dynamic, _comm
    _dynamic, _comm = dynamic, comm


def stopped():
    global _comm
    _comm = None


def check(rc, what=""):
    """Raises the mapped exception for rc != HVDS_SUCCESS, with hvds_last_error()'s message."""
    if rc != _lib.SUCCESS:
        msg = _lib.last_error() or _lib.result_str(rc)
        raise call_error(rc, "%s: %s" % (what, msg) if what and what not in msg else msg)


def init_comm():
    """The MPI communicator the running job was formed of by init(comm=...), else None."""
    return _comm


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
