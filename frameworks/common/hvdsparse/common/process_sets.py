"""Process sets: Horovod's ProcessSet, global_process_set, add_process_set, remove_process_set."""
import ctypes

from hvdsparse.common import _lib, job_state, mpi_comm


class ProcessSet:
    """A subset of the ranks. Ids are assigned at init (static sets) or by add_process_set().

    ranks_or_comm: global ranks, or an mpi4py communicator (a subset of the one given to
    hvd.init(comm=...)), whose members' ranks the set gets when it is registered."""

    def __init__(self, ranks_or_comm):
        self.process_set_id = None
        self.mpi_comm = None
        if mpi_comm.is_comm(ranks_or_comm):
            if not isinstance(ranks_or_comm, mpi_comm.mpi().Comm):
                raise ValueError("ProcessSet takes a list of ranks or an mpi4py communicator")
            self.mpi_comm = ranks_or_comm
            self.ranks = None  # known once registered
            return
        self.ranks = sorted(int(r) for r in ranks_or_comm)

    def _check_registered(self):
        if self.process_set_id is None:
            raise ValueError("Process set has not been registered: call hvd.init(process_sets="
                             "...) or hvd.add_process_set() first.")

    def size(self):
        """Number of ranks, or None when the set is not registered."""
        if self.process_set_id is None:
            return None
        n = _lib.lib().hvds_process_set_size(self.process_set_id)
        if n < 0:
            if not job_state.is_initialized():
                raise ValueError(job_state.NOT_INITIALIZED)
            raise ValueError("Process set %d is unknown." % self.process_set_id)
        return n

    def rank(self):
        """This process's rank within the set, or -1 when not a member (None: not registered)."""
        if self.process_set_id is None:
            return None
        if not job_state.is_initialized():
            raise ValueError(job_state.NOT_INITIALIZED)
        return _lib.lib().hvds_process_set_rank(self.process_set_id)

    def included(self):
        """True when this process is a member (None: not registered)."""
        if self.process_set_id is None:
            return None
        v = _lib.lib().hvds_process_set_included(self.process_set_id)
        if v < 0:
            if not job_state.is_initialized():
                raise ValueError(job_state.NOT_INITIALIZED)
            raise ValueError("Process set %d is unknown." % self.process_set_id)
        return bool(v)

    def __str__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s, mpi_comm=%s)" % (
            self.process_set_id, self.ranks, self.mpi_comm)

    __repr__ = __str__


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0

_registered = {}  # id -> ProcessSet (global and static sets, then dynamic ones)


def _after_init(assigned, lists, comm):
    """assigned: (ProcessSet, id or None, ranks) per set passed to init; lists: the registered
    rank lists (id = index + 1), some known here only as another process's ProcessSet(comm)."""
    _registered.clear()
    global_process_set.process_set_id = 0
    global_process_set.ranks = list(range(job_state.size()))
    global_process_set.mpi_comm = comm
    _registered[0] = global_process_set
    for ps, pid, ranks in assigned:
        ps.process_set_id, ps.ranks = pid, ranks
        if pid is not None:
            _registered.setdefault(pid, ps)
    for i, ranks in enumerate(lists):
        _registered.setdefault(i + 1, _registered_set(i + 1, ranks))


def _registered_set(pid, ranks):
    ps = ProcessSet(ranks)
    ps.process_set_id = pid
    return ps


def _before_shutdown():
    for pid, ps in list(_registered.items()):
        if ps is not global_process_set:
            ps.process_set_id = None
    _registered.clear()
    _registered[0] = global_process_set


def ids_and_ranks():
    """{id: ranks} of every set the runtime has registered, the global set (0) included."""
    job_state.require_init()
    lib = _lib.lib()
    count = lib.hvds_process_set_ids(None)
    ids = (ctypes.c_int32 * max(1, count))()
    out = {}
    for pid in ids[:lib.hvds_process_set_ids(ids)]:
        ranks = (ctypes.c_int32 * max(1, lib.hvds_process_set_ranks(pid, None)))()
        n = lib.hvds_process_set_ranks(pid, ranks)
        if n >= 0:
            out[pid] = list(ranks[:n])
    return out


def process_set_by_id(pid):
    return _registered.get(pid)


def set_id(process_set):
    """The id the C API takes for process_set; ValueError when it is not registered, or its id
    names no registered set (one removed, or set by hand)."""
    process_set._check_registered()
    pid = process_set.process_set_id
    if job_state.is_initialized() and pid not in _registered:
        raise ValueError("Process set %d is unknown: it was never registered here, or has been "
                         "removed." % pid)
    return pid


def root_index(root_rank, process_set):
    """The C API's root: Horovod's root_rank is a global rank, the C API wants its rank within
    the set (the same number for the global set, where the runtime checks its range)."""
    if set_id(process_set) == 0:
        return int(root_rank)
    if root_rank not in process_set.ranks:
        raise ValueError("root_rank %d is not a member of %s" % (root_rank, process_set))
    return process_set.ranks.index(root_rank)


def _require_dynamic():
    job_state.require_init()
    if not job_state.dynamic_process_sets():
        raise ValueError("Runtime was not initialized with dynamic process sets: use "
                         "hvd.init(process_sets=\"dynamic\") or HOROVOD_DYNAMIC_PROCESS_SETS=1.")


def _init_comm_for(what):
    comm = job_state.init_comm()
    if comm is None:
        raise ValueError("%s of a ProcessSet(comm) needs hvd.init(comm=...): its members' ranks "
                         "are those of the communicator init was given" % what)
    return comm


def _add(ranks):
    """Registers ranks (collective over every rank); returns the set's id."""
    arr = (ctypes.c_int32 * max(1, len(ranks)))(*ranks)
    out = ctypes.c_int32(-1)
    job_state.check(_lib.lib().hvds_add_process_set(arr, len(ranks), ctypes.byref(out)),
                 "add_process_set")
    return out.value


def add_process_set(process_set):
    """Registers a set on every rank (call identically, in the same order, on all ranks).

    Needs init(process_sets="dynamic") or HOROVOD_DYNAMIC_PROCESS_SETS=1. Returns the ProcessSet;
    ValueError for the rank list of a set that is registered already (the global set's among
    them), as in Horovod. A ProcessSet(comm) (or a communicator)
    registers the distinct rank lists the communicator has on the members, in order (every
    half of a split), and takes the id of its own; unregistered where it is COMM_NULL."""
    _require_dynamic()
    ps = process_set if isinstance(process_set, ProcessSet) else ProcessSet(process_set)
    if ps.process_set_id is not None:
        raise ValueError("Process set is already registered with id %d." % ps.process_set_id)
    if ps.mpi_comm is None:
        if ps.ranks in ids_and_ranks().values():  # every rank sees the same registered sets
            raise ValueError("Attempted to add a duplicate process set: %s" % ps)
        ps.process_set_id = _add(ps.ranks)
        _registered.setdefault(ps.process_set_id, ps)
        return ps
    distinct, mine = mpi_comm.gather_sets(_init_comm_for("add_process_set"), ps.mpi_comm)
    for ranks in distinct:
        pid = _add(ranks)
        if ranks == mine:
            ps.process_set_id, ps.ranks = pid, mine
            _registered.setdefault(pid, ps)
        _registered.setdefault(pid, _registered_set(pid, ranks))
    return ps


def remove_process_set(process_set):
    """Deregisters a set on every rank (same order everywhere). False for the global set or a
    set that is not registered. For a ProcessSet(comm), a collective over the communicator
    init was given that removes every set its add_process_set registered."""
    _require_dynamic()
    if process_set.mpi_comm is not None and job_state.init_comm() is not None:
        return _remove_by_comm(process_set)
    pid = process_set.process_set_id
    if pid is None or pid == 0:
        return False
    if _lib.lib().hvds_remove_process_set(pid) != _lib.SUCCESS:
        return False
    for key, ps in list(_registered.items()):
        if key == pid:
            del _registered[key]
    process_set.process_set_id = None
    return True


def _remove_by_comm(process_set):
    ids = job_state.init_comm().allgather(process_set.process_set_id)
    removed = False
    for pid in sorted({i for i in ids if i}):
        if _lib.lib().hvds_remove_process_set(pid) != _lib.SUCCESS:
            continue
        removed = removed or pid == process_set.process_set_id
        gone = _registered.pop(pid, None)
        if gone is not None:
            gone.process_set_id = None
    process_set.process_set_id = None
    return removed
