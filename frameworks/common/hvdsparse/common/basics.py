"""Horovod's common/basics.py API for the framework bindings: the lifecycle (init, shutdown, the
reset hooks), what the build offers, the timeline; the job's own queries (rank, size, ...) are
job_state's, re-exported here."""
import atexit
import contextlib
import ctypes
import os
import sys
import threading

from hvdsparse.common import _lib, job_state, mpi_comm
from hvdsparse.common import process_sets as ps_mod
from hvdsparse.common.errors import NOT_INITIALIZED  # noqa: F401
from hvdsparse.common.job_state import (  # noqa: F401
    check, cross_rank, cross_size, dynamic_process_sets, init_comm, is_homogeneous,
    is_initialized, local_rank, local_size, rank, require_init, size)

_state_lock = threading.RLock()
_init_count = 0  # inits this process asked the runtime for (it numbers them)
_reset_hooks = []  # called after init and after shutdown: fn(event) with event "init"/"shutdown"


def register_reset_hook(fn):
    """Lets a binding drop per-run state (handle maps, name counters) at init and shutdown. The
    "shutdown" event comes once the runtime has stopped: operations still in flight until then
    read their inputs and write their outputs, which the binding keeps alive till that point."""
    if fn not in _reset_hooks:
        _reset_hooks.append(fn)


def _truthy(value):
    return value is not None and value.strip().lower() not in ("", "0", "false", "no", "off")


def init(comm=None, process_sets=None):
    """Starts the runtime (idempotent). comm: an mpi4py communicator, or a list of
    MPI.COMM_WORLD ranks, whose members form the job (needs mpi4py; mpi_comm.py); None or []:
    the launcher's job. process_sets: a list of ProcessSet (static sets, the same on every rank;
    ProcessSet(comm) needs comm), or "dynamic" to allow add_process_set()/remove_process_set()
    later."""
    global _init_count
    if isinstance(comm, (list, tuple, range)) and len(comm) == 0:
        comm = None
    if comm is not None and not isinstance(comm, (list, tuple, range)) and \
            not mpi_comm.is_comm(comm):
        raise ValueError("init(comm=...) takes an mpi4py communicator or a list of ranks, not %r"
                         % (comm,))
    with _state_lock:
        if is_initialized():
            return
        static = []
        if isinstance(process_sets, str):
            if process_sets != "dynamic":
                raise ValueError("process_sets must be a list of ProcessSet or \"dynamic\"")
            dynamic = True
        else:
            dynamic = False
            static = [ps for ps in (process_sets or []) if ps is not ps_mod.global_process_set]
        dynamic = dynamic or _truthy(os.environ.get("HVDSPARSE_DYNAMIC_PROCESS_SETS")) or \
            _truthy(os.environ.get("HOROVOD_DYNAMIC_PROCESS_SETS"))
        by_comm = [ps.mpi_comm for ps in static if ps.mpi_comm is not None]
        if by_comm and comm is None:
            raise ValueError("ProcessSet(comm) needs hvd.init(comm=...): its members' ranks are "
                             "those of the communicator init was given")
        world, variables, comm_sets = None, None, []
        if comm is not None:
            world = mpi_comm.world_comm(comm)
            variables, comm_sets = mpi_comm.bootstrap(world, _init_count, by_comm)
        lists, assigned = _static_lists(static, comm_sets)
        lib = _lib.lib()
        with mpi_comm.environment(variables) if variables else contextlib.nullcontext():
            _init_count += 1  # the runtime numbers this init whether it succeeds or not
            if lists:
                flat = [r for ranks in lists for r in ranks]
                ranks = (ctypes.c_int32 * max(1, len(flat)))(*flat)
                sizes = (ctypes.c_int32 * len(lists))(*[len(r) for r in lists])
                check(lib.hvds_init_with_process_sets(ranks, sizes, len(lists)), "init")
            else:
                check(lib.hvds_init(), "init")
        job_state.started(dynamic, world)
        ps_mod._after_init(assigned, lists, world)
        whole = [i for i, ps in enumerate(static) if ps.ranks == list(range(size()))]
        if whole:  # the global set already holds every rank
            ps = static[whole[0]]
            _shutdown_locked()
            raise _duplicate(whole[0], ps)
        for hook in list(_reset_hooks):
            hook("init")


def _duplicate(index, ps):
    ps.process_set_id = None
    return ValueError("Horovod could not be initialized because process_sets entry number %d is a "
                      "duplicate: %s" % (index, ps))


def _static_lists(static, comm_sets):
    """The rank lists to register (set id = index + 1) and each ProcessSet's id. A
    ProcessSet(comm) stands for the distinct lists its communicator has on the members (a
    split's halves), each registered once; it takes the id of its own (None on a process
    whose communicator is COMM_NULL)."""
    lists, assigned, by_comm = [], [], iter(comm_sets)
    for index, ps in enumerate(static):
        if ps.mpi_comm is None:
            if list(ps.ranks) in lists:
                raise _duplicate(index, ps)
            lists.append(list(ps.ranks))
            assigned.append((ps, len(lists), ps.ranks))
            continue
        distinct, mine = next(by_comm)
        for ranks in distinct:
            if ranks not in lists:
                lists.append(ranks)
        assigned.append((ps, lists.index(mine) + 1 if mine is not None else None, mine))
    return lists, assigned


def shutdown():
    """Stops the runtime; pending operations fail. Safe to call twice and before init. The
    bindings drop what pending operations hold (inputs, outputs) only after the runtime has
    stopped: its thread may be copying into them until then."""
    with _state_lock:
        _shutdown_locked()


def _shutdown_locked():
    if _lib._lib is None or not is_initialized():
        return
    _lib.lib().hvds_shutdown()
    job_state.stopped()
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


def _get_process_set_ids_and_ranks():
    """Horovod's private name for {id: ranks} of the registered process sets; its tests call it
    as hvd.mpi_ops._basics._get_process_set_ids_and_ranks()."""
    return ps_mod.ids_and_ranks()


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


def gpu_operations_routed():
    """True when GPU tensors' collectives run on the GPU by NCCL (HVDSPARSE_GPU_OPERATIONS=nccl
    with the device library), False when they are staged through host memory."""
    return bool(_lib.lib().hvds_gpu_operations_routed())


def rocm_built():
    return False


def start_timeline(file_path, mark_cycles=False):
    """Starts writing the Chrome-trace timeline (rank 0 writes it)."""
    check(_lib.lib().hvds_start_timeline(str(file_path).encode(), 1 if mark_cycles else 0),
          "start_timeline")


def stop_timeline():
    check(_lib.lib().hvds_stop_timeline(), "stop_timeline")
