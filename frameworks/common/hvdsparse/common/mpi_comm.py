"""hvd.init(comm=...) and ProcessSet(comm) over mpi4py (docs/launching.md, "An MPI communicator").

The runtime needs no MPI: the communicator only bootstraps it. Its rank 0 picks the rendezvous
(its address, a free port, a fresh job id and secret) and broadcasts it; every member then runs
the ordinary init as a torchrun-style rank (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
MASTER_ADDR, MASTER_PORT: rank 0 serves the store), with the variables set only for that call.
mpi4py is imported only when a communicator or a rank list is passed."""
import contextlib
import os
import random
import secrets
import socket
import uuid

INSTALL_HINT = "install mpi4py (pip install mpi4py) to pass an MPI communicator"

# Set for the init call: the torchrun-style identity and our knobs that override it.
_IDENTITY = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
             "HVDSPARSE_JOB_ID", "HVDSPARSE_SECRET", "HVDSPARSE_HOSTNAME")
# Unset for the init call: a launcher identity that would win over it (HVDSPARSE_RANK selects
# `hvdsparse run`'s store), a store address or port that would replace MASTER_*, torchrun's
# agent-store flag (it moves the port).
_HIDDEN = ("HVDSPARSE_RANK", "HOROVOD_RANK", "HVDSPARSE_SIZE", "HOROVOD_SIZE",
           "HVDSPARSE_GLOO_RENDEZVOUS_ADDR", "HOROVOD_GLOO_RENDEZVOUS_ADDR",
           "HVDSPARSE_GLOO_RENDEZVOUS_PORT", "HOROVOD_GLOO_RENDEZVOUS_PORT",
           "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RUN_ID")
_PORTS = (20000, 32000)  # below Linux's ephemeral range, as the derived ports (launching.md)


def is_comm(obj):
    """True for an mpi4py communicator (or anything shaped like one), without importing mpi4py."""
    return hasattr(obj, "Get_rank") and hasattr(obj, "Get_size") and hasattr(obj, "Get_group")


def mpi():
    """mpi4py.MPI; NotImplementedError that says to install it when it is missing."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise NotImplementedError("hvdsparse needs mpi4py for init(comm=...) and "
                                  "ProcessSet(comm): %s (%s)" % (INSTALL_HINT, e)) from None
    return MPI


def world_comm(comm):
    """The communicator init(comm=comm) forms a job of. comm: an mpi4py communicator, or a
    list of MPI.COMM_WORLD ranks (the job's ranks in list order), as in Horovod. ValueError on
    a process the list leaves out, and for a list of anything but distinct valid ranks."""
    MPI = mpi()
    if not isinstance(comm, (list, tuple, range)):
        if not isinstance(comm, MPI.Comm) or comm == MPI.COMM_NULL:
            raise ValueError("init(comm=...) takes an mpi4py communicator or a list of ranks, "
                             "not %r" % (comm,))
        if comm.Is_inter():
            raise ValueError("init(comm=...) takes an intracommunicator")
        return comm
    ranks = list(comm)
    size = MPI.COMM_WORLD.Get_size()
    if any(not isinstance(r, int) or isinstance(r, bool) or not 0 <= r < size for r in ranks) \
            or len(set(ranks)) != len(ranks):
        raise ValueError("init(comm=%s): the list must name distinct ranks of MPI.COMM_WORLD "
                         "(0..%d)" % (ranks, size - 1))
    me = MPI.COMM_WORLD.Get_rank()
    if me not in ranks:
        raise ValueError("init(comm=%s): this process (MPI.COMM_WORLD rank %d) is not in the "
                         "list, so it is in no job" % (ranks, me))
    group = MPI.COMM_WORLD.Get_group().Incl(ranks)
    try:
        # Collective over the listed ranks only: the others are not waited for.
        return MPI.COMM_WORLD.Create_group(group)
    finally:
        group.Free()


def comm_ranks(comm, world):
    """The sorted ranks in world (the init communicator) of comm's members; None for
    COMM_NULL. ValueError when a member is outside world. Local: no communication."""
    MPI = mpi()
    if comm == MPI.COMM_NULL:
        return None
    mine, theirs = comm.Get_group(), world.Get_group()
    try:
        ranks = MPI.Group.Translate_ranks(mine, list(range(mine.Get_size())), theirs)
    finally:
        mine.Free()
        theirs.Free()
    if any(r == MPI.UNDEFINED for r in ranks):
        raise ValueError("ProcessSet(comm): the communicator has members outside the one "
                         "hvd.init(comm=...) was given; it must be a subset of it")
    return sorted(ranks)


def _free_port(bind):
    """A port rank 0 can listen on (bind: "" for every interface), from [20000, 32000)."""
    for _ in range(64):
        port = random.randrange(*_PORTS)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((bind, port))
                return port
            except OSError:
                continue
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # a crowded range: any port
        s.bind((bind, 0))
        return s.getsockname()[1]


def _host_labels(leaders):
    """Leader rank -> host name for the runtime's grouping: the MPI processor name of each
    shared-memory node's first rank, made unique when two nodes report the same name."""
    names = {}
    for leader, name in sorted(leaders):
        names.setdefault(name, []).append(leader)
    return {leader: (name if len(group) == 1 else "%s-%d" % (name, leader))
            for name, group in names.items() for leader in group}


def bootstrap(world, init_count, set_comms):
    """Collective over world. Returns (variables for the init call, [per set_comms entry the
    distinct rank lists in order of their lowest member's rank, and this process's]).

    init_count: inits this process has made; the runtime numbers them and its members must
    agree. set_comms: the communicators of the ProcessSet(comm)s passed to init, in order."""
    MPI = mpi()
    shared = world.Split_type(MPI.COMM_TYPE_SHARED, key=world.Get_rank())
    try:
        local_rank, local_size = shared.Get_rank(), shared.Get_size()
        leader = shared.bcast((world.Get_rank(), MPI.Get_processor_name()), root=0)
    finally:
        shared.Free()
    try:
        mine, error = [comm_ranks(c, world) for c in set_comms], None
    except ValueError as e:
        mine, error = None, str(e)
    infos = world.allgather((init_count, leader, local_size, mine, error))
    _check_agreement(infos)
    decision = None
    if world.Get_rank() == 0:
        one_host = all(i[2] == world.Get_size() for i in infos)
        addr = "127.0.0.1" if one_host else socket.gethostname()
        decision = {"addr": addr, "port": _free_port("127.0.0.1" if one_host else ""),
                    "job": "mpi-%s" % uuid.uuid4().hex[:16], "secret": secrets.token_hex(32),
                    "hosts": _host_labels({i[1] for i in infos})}
    decision = world.bcast(decision, root=0)
    env = {"RANK": world.Get_rank(), "WORLD_SIZE": world.Get_size(), "LOCAL_RANK": local_rank,
           "LOCAL_WORLD_SIZE": local_size, "MASTER_ADDR": decision["addr"],
           "MASTER_PORT": decision["port"], "HVDSPARSE_JOB_ID": decision["job"],
           "HVDSPARSE_SECRET": decision["secret"],
           "HVDSPARSE_HOSTNAME": decision["hosts"][leader[0]]}
    sets = []
    for k in range(len(set_comms)):
        distinct = []
        for info in infos:
            if info[3][k] is not None and info[3][k] not in distinct:
                distinct.append(info[3][k])
        sets.append((sorted(distinct), mine[k]))
    return {key: str(value) for key, value in env.items()}, sets


def _check_agreement(infos):
    """The same ValueError on every member when one cannot join (so none waits for it)."""
    for rank, info in enumerate(infos):
        if info[4] is not None:
            raise ValueError("rank %d of the communicator: %s" % (rank, info[4]))
    if len({len(i[3]) for i in infos}) != 1:
        raise ValueError("init(comm=..., process_sets=...): the members pass different numbers "
                         "of ProcessSet(comm) (%s); pass the same list on every member"
                         % [len(i[3]) for i in infos])
    counts = [i[0] for i in infos]
    if len(set(counts)) != 1:
        raise ValueError("init(comm=...): the members have initialised hvdsparse different "
                         "numbers of times before (%s, by rank in the communicator); the "
                         "runtime numbers a process's inits and the members of a job must "
                         "agree, so every member must have made the same inits" % counts)


def gather_sets(world, comm):
    """Collective over world (add_process_set): the distinct rank lists of comm across the
    members, in order, and this process's (None for COMM_NULL)."""
    try:
        mine, error = comm_ranks(comm, world), None
    except ValueError as e:
        mine, error = None, str(e)
    infos = world.allgather((mine, error))
    for rank, (_, err) in enumerate(infos):
        if err is not None:
            raise ValueError("rank %d of the communicator: %s" % (rank, err))
    distinct = []
    for ranks, _ in infos:
        if ranks is not None and ranks not in distinct:
            distinct.append(ranks)
    return sorted(distinct), mine


@contextlib.contextmanager
def environment(variables):
    """Sets variables and unsets _HIDDEN for the block, then restores every one as it was."""
    saved = {k: os.environ.get(k) for k in _IDENTITY + _HIDDEN}
    try:
        for k in _HIDDEN:
            os.environ.pop(k, None)
        os.environ.update(variables)
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
