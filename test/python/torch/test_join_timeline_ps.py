"""Join with uneven batches, barrier, timeline, dynamic process sets, sparse allreduce."""
import json
import os
import tempfile

import pytest
import torch

import hvdsparse.torch as hvd


def test_join_uneven_batches():
    size, rank = hvd.size(), hvd.rank()
    for step in range(rank + 1):  # rank r runs r + 1 batches
        out = hvd.allreduce(torch.ones(5), op=hvd.Average, name="join.step%d" % step)
        active = size - step  # ranks that have not joined contribute ones, the others zeros
        assert torch.allclose(out, torch.full((5,), active / size))
    last = hvd.join()
    assert last == size - 1


def test_broadcast_while_a_rank_joined_raises_and_join_takes_a_device_id():
    """As Horovod: a broadcast cannot run while a rank has joined, and raises on the ranks that
    asked for it; join(device) takes a device id (a CPU build makes the zeros on the CPU)."""
    if hvd.rank() == 0:
        last = hvd.join(hvd.local_rank())
    else:
        with pytest.raises(RuntimeError, match="Broadcast is not supported with Join"):
            hvd.broadcast(torch.zeros(3), 1, name="join.broadcast")
        last = hvd.join()
    assert last != 0


def test_unnamed_allgathers_while_ranks_take_turns_joining_raise_instead_of_hanging():
    """Each rank joins first in turn while the others allgather without a name: the automatic
    names then differ between ranks (each counts its own unnamed operations), so the refusal
    must come without waiting for every rank's request."""
    for first in range(hvd.size()):
        if hvd.rank() == first:
            last = hvd.join()
        else:
            with pytest.raises(RuntimeError, match="Allgather is not supported with Join"):
                hvd.allgather(torch.ones(2, 3))
            last = hvd.join()
        assert last != first
        assert hvd.allgather_object(last) == [last] * hvd.size()


def test_barrier_and_multiple_collectives():
    handles = [hvd.allreduce_async(torch.ones(3), name="bm%d" % i) for i in range(3)]
    hvd.barrier()
    for h in handles:
        hvd.synchronize(h)
    hvd.barrier(process_set=hvd.global_process_set)


def test_timeline_file():
    path = os.path.join(tempfile.gettempdir(), "hvdsparse_torch_timeline_%s.json"
                        % os.environ.get("HOROVOD_JOB_ID", "x"))
    path = hvd.broadcast_object(path, 0, name="tl.path")
    hvd.start_timeline(path)
    for i in range(3):
        hvd.allreduce(torch.ones(10), name="tl.tensor")
        hvd.allgather(torch.ones(2), name="tl.gather")
    hvd.barrier()
    hvd.stop_timeline()
    hvd.barrier()
    if hvd.rank() == 0:
        text = open(path).read()
        assert "allreduce.tl.tensor" in text and "allgather.tl.gather" in text
        events = json.loads(text.rstrip().rstrip(",") + ("" if text.rstrip().endswith("]")
                                                          else "]"))
        assert any(e.get("ph") == "B" for e in events if isinstance(e, dict))
        os.unlink(path)


def test_dynamic_process_sets():
    size, rank = hvd.size(), hvd.rank()
    evens = hvd.add_process_set([r for r in range(size) if r % 2 == 0])
    odds = hvd.add_process_set(hvd.ProcessSet([r for r in range(size) if r % 2 == 1]))
    mine, other = (evens, odds) if rank % 2 == 0 else (odds, evens)
    assert mine.included() and not other.included()
    assert mine.rank() == mine.ranks.index(rank) and mine.size() == len(mine.ranks)
    out = hvd.allreduce(torch.tensor([float(rank)]), op=hvd.Sum, process_set=mine)
    assert out.item() == sum(mine.ranks)
    g = hvd.allgather(torch.tensor([rank]), process_set=mine)
    assert g.tolist() == mine.ranks
    for root in mine.ranks:
        b = hvd.broadcast(torch.tensor([float(rank)]), root, process_set=mine)
        assert b.item() == root
    obj = hvd.broadcast_object({"root": mine.ranks[0]}, mine.ranks[0], process_set=mine)
    assert obj == {"root": mine.ranks[0]}
    x = torch.rand(3, requires_grad=True)
    hvd.allreduce(x, op=hvd.Sum, process_set=mine).sum().backward()
    assert torch.allclose(x.grad, torch.full((3,), float(mine.size())))
    hvd.barrier(process_set=mine)
    assert hvd.remove_process_set(odds)
    assert hvd.remove_process_set(evens)
    assert evens.process_set_id is None
    assert not hvd.remove_process_set(hvd.global_process_set)


def test_sparse_allreduce():
    size, rank = hvd.size(), hvd.rank()
    i = torch.tensor([[rank, 0]])
    v = torch.tensor([1.0, 2.0])
    s = torch.sparse_coo_tensor(i, v, (size,))
    out = hvd.sparse_allreduce_async(s, "sp", hvd.Sum)().to_dense()
    expected = torch.ones(size)
    expected[0] += 2.0 * size
    assert torch.allclose(out, expected)
