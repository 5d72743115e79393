"""What both bindings do the same way, through each one's public API (see conftest.py). Every
rank runs every test, in the same order."""
import contextlib
import time

import pytest

from hvdsparse.common import _lib


@contextlib.contextmanager
def process_set(hvd, ranks):
    """A process set for one test: added, then removed, on every rank."""
    ps = hvd.add_process_set(ranks)
    try:
        yield ps
    finally:
        hvd.remove_process_set(ps)


def test_average_is_deprecated_but_works(hvd, fw):
    with pytest.warns(DeprecationWarning, match="`average` has been replaced with `op`"):
        summed = hvd.allreduce(fw.tensor([1.0, 2.0]), average=False, name="agree.avg.sum")
    assert fw.values(summed) == [hvd.size(), 2.0 * hvd.size()]
    with pytest.warns(DeprecationWarning):
        mean = hvd.allreduce(fw.tensor([1.0, 2.0]), average=True, name="agree.avg.mean")
    assert fw.values(mean) == [1.0, 2.0]
    with pytest.raises(ValueError, match="supersedes"):
        hvd.allreduce(fw.tensor([1.0]), average=True, op=hvd.Sum)


def test_operation_that_ends_in_timeout_raises(hvd, fw, monkeypatch):
    """An operation whose own status is HVDS_TIMEOUT (a transport timeout) raises when waited
    for; the wait does not mistake it for the end of a wait slice and wait forever. Here every
    wait reports HVDS_TIMEOUT while the allreduce itself completes."""
    lib = _lib.lib()

    def wait_times_out(handle, timeout_ms):
        time.sleep(0.005)
        return _lib.TIMEOUT
    monkeypatch.setattr(lib, "hvds_wait", wait_times_out)
    with pytest.raises(fw.unknown, match="timeout") as caught:
        hvd.allreduce(fw.tensor([1.0]), op=hvd.Sum, name="agree.timeout")
    assert isinstance(caught.value, hvd.HorovodInternalError)
    monkeypatch.undo()
    assert fw.values(hvd.allreduce(fw.tensor([1.0]), op=hvd.Sum, name="agree.after")) == \
        [hvd.size()]


def test_enqueue_refusals_raise_the_same_kinds(hvd, fw):
    """Refused at the call: misuse is a ValueError (the binding's invalid-argument class)."""
    x = fw.tensor([1.0, 2.0])
    with process_set(hvd, [0]) as only_zero:
        if hvd.rank() == 0:
            assert fw.values(hvd.allreduce(x, op=hvd.Sum, process_set=only_zero)) == [1.0, 2.0]
        else:
            with pytest.raises(fw.invalid_argument, match="not a member") as caught:
                hvd.allreduce(x, op=hvd.Sum, process_set=only_zero)
            assert isinstance(caught.value, ValueError)
    with pytest.raises(ValueError, match="has not been registered"):
        hvd.allreduce(x, process_set=hvd.ProcessSet([0, 1]))


def test_broadcast_root_is_a_global_rank(hvd, fw):
    size, rank = hvd.size(), hvd.rank()
    with process_set(hvd, [r for r in range(size) if r % 2 == 1]) as odds:
        if odds.included():
            got = hvd.broadcast(fw.tensor([float(rank)]), root_rank=1, process_set=odds)
            assert fw.values(got) == [1.0]
            with pytest.raises(ValueError, match="not a member"):
                hvd.broadcast(fw.tensor([1.0]), root_rank=0, process_set=odds)


def test_objects_over_a_process_set(hvd, fw):
    size, rank = hvd.size(), hvd.rank()
    with process_set(hvd, [r for r in range(size) if r % 2 == 0]) as evens:
        if evens.included():
            last = evens.ranks[-1]
            got = hvd.broadcast_object({"from": rank}, root_rank=last, process_set=evens)
            assert got == {"from": last}
            assert hvd.allgather_object(("rank", rank), process_set=evens) == \
                [("rank", r) for r in evens.ranks]


def test_join_and_barrier(hvd, fw):
    last = int(hvd.join())
    assert 0 <= last < hvd.size()
    hvd.barrier()


@pytest.mark.parametrize("splits", ["uneven", "too_many", "negative", "too_few_rows"])
def test_alltoall_splits_are_checked_before_enqueue(hvd, fw, splits):
    n = hvd.size()
    x = fw.tensor([float(i) for i in range(2 * n + (1 if splits == "uneven" else 0))])
    bad = {"uneven": None, "too_many": [1] * (n + 1), "negative": [-1] + [2] * n,
           "too_few_rows": [1] * n}[splits]
    if splits == "negative":
        bad = bad[:n]
        bad[-1] += 2 * n - sum(bad)
    with pytest.raises(ValueError):
        hvd.alltoall(x, splits=bad, name="agree.splits.%s" % splits)


@pytest.mark.parametrize("op", ["Max", "Adasum"])
def test_sparse_ops_take_sum_or_average(hvd, fw, op):
    with pytest.raises(NotImplementedError):
        fw.sparse_allreduce(getattr(hvd, op))
