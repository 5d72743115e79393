"""hvd.init(comm=...) and ProcessSet(comm) with mpi4py, under `mpirun -np 4` (issue 34).

Every rank runs the scenarios in order; the first failure prints its traceback and aborts the
MPI job, so no rank waits on a collective the failed one never reaches. Each rank prints
"COMM OK" at the end."""
import os
import sys
import traceback

from mpi4py import MPI
import torch

import hvdsparse.torch as hvd

WORLD = MPI.COMM_WORLD
ME = WORLD.Get_rank()


def expect(cond, what):
    if not cond:
        raise AssertionError("rank %d: %s" % (ME, what))


def raises(exc, match, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc as e:
        expect(match in str(e), "%s: %r does not say %r" % (fn.__name__, str(e), match))
        return
    raise AssertionError("rank %d: %s did not raise %s" % (ME, fn.__name__, exc.__name__))


def allreduce_sum(value, **kwargs):
    return hvd.allreduce(torch.tensor([float(value)]), op=hvd.Sum, **kwargs).item()


def identity_restored(before):
    after = {k: os.environ.get(k) for k in before}
    expect(after == before, "environment not restored: %s != %s" % (after, before))


def world_job():
    """(a) The job is COMM_WORLD: MPI's ranks, its host grouping; then a plain init is the
    mpirun job again."""
    keys = ["RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "HVDSPARSE_SECRET",
            "HVDSPARSE_JOB_ID", "HVDSPARSE_HOSTNAME", "OMPI_COMM_WORLD_RANK"]
    before = {k: os.environ.get(k) for k in keys}
    hvd.init(comm=WORLD)
    identity_restored(before)
    shared = WORLD.Split_type(MPI.COMM_TYPE_SHARED)
    expect((hvd.rank(), hvd.size()) == (ME, WORLD.Get_size()), "rank/size differ from MPI's")
    expect((hvd.local_rank(), hvd.local_size()) == (shared.Get_rank(), shared.Get_size()),
           "local rank/size differ from MPI's shared-memory split")
    expect((hvd.cross_rank(), hvd.cross_size()) == (0, 1), "one host: cross 0 of 1")
    shared.Free()
    expect(hvd.global_process_set.mpi_comm is WORLD, "global set's mpi_comm")
    expect(allreduce_sum(ME) == sum(range(WORLD.Get_size())), "world allreduce")
    hvd.shutdown()
    hvd.init()  # the mpirun job of the launcher's variables, as without comm
    expect((hvd.rank(), hvd.size()) == (ME, WORLD.Get_size()), "plain init after comm init")
    expect(allreduce_sum(1) == WORLD.Get_size(), "plain init's allreduce")
    expect(hvd.global_process_set.mpi_comm is None, "plain init keeps no comm")
    hvd.shutdown()


def halves():
    """(b) Two jobs of two ranks, each of its half of COMM_WORLD (ranks reversed in the half)."""
    half = WORLD.Split(color=ME % 2, key=-ME)
    members = sorted(r for r in range(WORLD.Get_size()) if r % 2 == ME % 2)
    # A store address or port left in the environment must not steer the comm's store.
    os.environ["HVDSPARSE_GLOO_RENDEZVOUS_PORT"] = "1"
    try:
        hvd.init(comm=half)
    finally:
        del os.environ["HVDSPARSE_GLOO_RENDEZVOUS_PORT"]
    expect((hvd.rank(), hvd.size()) == (half.Get_rank(), 2), "half's rank/size")
    expect(hvd.rank() == members[::-1].index(ME), "ranks follow the half's order")
    expect(allreduce_sum(ME) == sum(members), "allreduce sums within the half only")
    got = hvd.allgather(torch.tensor([ME])).tolist()
    expect(got == members[::-1], "allgather in the half's order: %s" % got)
    # ProcessSet(comm) must be a subset of the init communicator.
    hvd.shutdown()
    hvd.init(comm=half, process_sets="dynamic")
    raises(ValueError, "subset", hvd.add_process_set, hvd.ProcessSet(WORLD))
    hvd.shutdown()
    half.Free()


def comm_process_sets():
    """(c) ProcessSet(comm) registered at init and by add_process_set."""
    parity = WORLD.Split(color=ME % 2, key=ME)
    evens, odds = [0, 2], [1, 3]
    mine = evens if ME % 2 == 0 else odds
    by_comm, zero = hvd.ProcessSet(parity), hvd.ProcessSet([0])
    expect(by_comm.ranks is None and by_comm.mpi_comm is parity, "unregistered ProcessSet(comm)")
    raises(ValueError, "hvd.init(comm=...)", hvd.init, process_sets=[by_comm])
    hvd.init(comm=WORLD, process_sets=[zero, by_comm])
    # The halves' lists, registered once each, in order of their lowest rank.
    expect(zero.process_set_id == 1, "rank-list set id")
    expect(by_comm.process_set_id == (2 if ME % 2 == 0 else 3), "ProcessSet(comm) id")
    expect(by_comm.ranks == mine, "ProcessSet(comm) ranks: %s" % by_comm.ranks)
    expect(by_comm.size() == 2 and by_comm.rank() == mine.index(ME), "set size/rank")
    expect(by_comm.included(), "member of its own half")
    expect(allreduce_sum(ME, process_set=by_comm) == sum(mine), "allreduce on ProcessSet(comm)")
    expect(allreduce_sum(1) == WORLD.Get_size(), "world allreduce beside the sets")
    hvd.shutdown()
    expect(by_comm.process_set_id is None, "shutdown unregisters")

    hvd.init(comm=WORLD, process_sets="dynamic")
    pairs = WORLD.Split(color=ME // 2, key=ME)
    ps = hvd.add_process_set(hvd.ProcessSet(pairs))
    pair = [ME - ME % 2, ME - ME % 2 + 1]
    expect(ps.ranks == pair and ps.size() == 2, "added ProcessSet(comm): %s" % ps.ranks)
    expect(allreduce_sum(ME, process_set=ps) == sum(pair), "allreduce on added ProcessSet(comm)")
    only_odd = WORLD.Split(color=0 if ME % 2 else MPI.UNDEFINED, key=ME)  # COMM_NULL on evens
    odd = hvd.add_process_set(only_odd)
    expect(odd.process_set_id is None if ME % 2 == 0 else odd.ranks == odds,
           "COMM_NULL leaves the set unregistered on non-members")
    if ME % 2:
        expect(allreduce_sum(ME, process_set=odd) == sum(odds), "allreduce on the odd set")
        only_odd.Free()
    expect(hvd.remove_process_set(ps), "remove_process_set(ProcessSet(comm))")
    expect(ps.process_set_id is None, "removed set unregistered")
    expect(allreduce_sum(1) == WORLD.Get_size(), "world allreduce after removal")
    hvd.shutdown()
    for c in (parity, pairs):
        c.Free()


def rank_list():
    """(d) init(comm=[3, 1]): ranks 3 and 1 form a job in that order; 0 and 2 are in none."""
    raises(ValueError, "distinct", hvd.init, comm=[1, 1])
    if ME in (3, 1):
        hvd.init(comm=[3, 1])
        expect((hvd.rank(), hvd.size()) == ([3, 1].index(ME), 2), "list job's rank/size")
        expect(allreduce_sum(ME) == 4, "allreduce within the list job")
        hvd.shutdown()
    else:
        raises(ValueError, "not in the list", hvd.init, comm=[3, 1])
        expect(not hvd.is_initialized(), "a process left out is not initialised")


def unequal_inits():
    """Members that made different numbers of inits cannot form a job: all fail alike."""
    if ME == 0:
        hvd.init(comm=MPI.COMM_SELF)
        expect(hvd.size() == 1, "a job of one")
        hvd.shutdown()
    raises(ValueError, "different numbers of times", hvd.init, comm=WORLD)


def main():
    expect(WORLD.Get_size() == 4, "run with mpirun -np 4")
    for scenario in (world_job, halves, comm_process_sets, rank_list, unequal_inits):
        scenario()
        WORLD.Barrier()
    print("rank %d: COMM OK" % ME, flush=True)


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        WORLD.Abort(1)
