"""Process sets: Horovod's ProcessSet, global_process_set, add_process_set, remove_process_set."""
import ctypes

from hvdsparse.common import _lib, basics


class ProcessSet:
    """A subset of the ranks. Ids are assigned at init (static sets) or by add_process_set()."""

    def __init__(self, ranks_or_comm):
        self.process_set_id = None
        if hasattr(ranks_or_comm, "Get_rank"):
            raise NotImplementedError("hvdsparse runs over Gloo: ProcessSet needs a list of "
                                      "ranks, not an MPI communicator.")
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
            if not basics.is_initialized():
                raise ValueError(basics.NOT_INITIALIZED)
            raise ValueError("Process set %d is unknown." % self.process_set_id)
        return n

    def rank(self):
        """This process's rank within the set, or -1 when not a member (None: not registered)."""
        if self.process_set_id is None:
            return None
        if not basics.is_initialized():
            raise ValueError(basics.NOT_INITIALIZED)
        return _lib.lib().hvds_process_set_rank(self.process_set_id)

    def included(self):
        """True when this process is a member (None: not registered)."""
        if self.process_set_id is None:
            return None
        v = _lib.lib().hvds_process_set_included(self.process_set_id)
        if v < 0:
            if not basics.is_initialized():
                raise ValueError(basics.NOT_INITIALIZED)
            raise ValueError("Process set %d is unknown." % self.process_set_id)
        return bool(v)

    def __str__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s)" % (self.process_set_id, self.ranks)

    __repr__ = __str__


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0

_registered = {}  # id -> ProcessSet (global and static sets, then dynamic ones)


def _after_init(static_sets):
    _registered.clear()
    global_process_set.process_set_id = 0
    global_process_set.ranks = list(range(basics.size()))
    _registered[0] = global_process_set
    for i, ps in enumerate(static_sets):
        ps.process_set_id = i + 1
        _registered[i + 1] = ps


def _before_shutdown():
    for pid, ps in list(_registered.items()):
        if ps is not global_process_set:
            ps.process_set_id = None
    _registered.clear()
    _registered[0] = global_process_set


def process_set_by_id(pid):
    return _registered.get(pid)


def set_id(process_set):
    """The id the C API takes for process_set; ValueError when it is not registered."""
    process_set._check_registered()
    return process_set.process_set_id


def root_index(root_rank, process_set):
    """The C API's root: Horovod's root_rank is a global rank, the C API wants its rank within
    the set (the same number for the global set, where the runtime checks its range)."""
    if set_id(process_set) == 0:
        return int(root_rank)
    if root_rank not in process_set.ranks:
        raise ValueError("root_rank %d is not a member of %s" % (root_rank, process_set))
    return process_set.ranks.index(root_rank)


def _require_dynamic():
    basics.require_init()
    if not basics.dynamic_process_sets():
        raise ValueError("Runtime was not initialized with dynamic process sets: use "
                         "hvd.init(process_sets=\"dynamic\") or HOROVOD_DYNAMIC_PROCESS_SETS=1.")


def add_process_set(process_set):
    """Registers a set on every rank (call identically, in the same order, on all ranks).

    Needs init(process_sets="dynamic") or HOROVOD_DYNAMIC_PROCESS_SETS=1. Returns the ProcessSet;
    an identical rank list gives the existing set's id."""
    _require_dynamic()
    ps = process_set if isinstance(process_set, ProcessSet) else ProcessSet(process_set)
    if ps.process_set_id is not None:
        raise ValueError("Process set is already registered with id %d." % ps.process_set_id)
    ranks = (ctypes.c_int32 * max(1, len(ps.ranks)))(*ps.ranks)
    out = ctypes.c_int32(-1)
    basics.check(_lib.lib().hvds_add_process_set(ranks, len(ps.ranks), ctypes.byref(out)),
                 "add_process_set")
    ps.process_set_id = out.value
    _registered.setdefault(out.value, ps)
    return ps


def remove_process_set(process_set):
    """Deregisters a set on every rank (same order everywhere). False for the global set or a
    set that is not registered."""
    _require_dynamic()
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
