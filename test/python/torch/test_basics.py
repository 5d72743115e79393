"""Init, shutdown, queries, built features, process sets at init."""
import os

import pytest
import torch

import hvdsparse.torch as hvd
from hvdsparse.common.exceptions import HorovodInternalError


def test_rank_size_match_launcher():
    assert hvd.rank() == int(os.environ["HOROVOD_RANK"])
    assert hvd.size() == int(os.environ["HOROVOD_SIZE"])
    assert hvd.local_rank() == int(os.environ["HOROVOD_LOCAL_RANK"])
    assert hvd.local_size() == int(os.environ["HOROVOD_LOCAL_SIZE"])
    assert hvd.cross_rank() == int(os.environ["HOROVOD_CROSS_RANK"])
    assert hvd.cross_size() == int(os.environ["HOROVOD_CROSS_SIZE"])
    assert hvd.is_homogeneous() in (True, False)
    assert hvd.is_initialized()


def test_built_queries():
    assert hvd.gloo_built() and hvd.gloo_enabled()
    assert not hvd.mpi_built() and not hvd.mpi_enabled()
    assert not hvd.ccl_built() and not hvd.ddl_built() and not hvd.rocm_built()
    assert isinstance(hvd.nccl_built(), int)
    assert hvd.cuda_built() in (True, False)
    with pytest.raises(ValueError):
        hvd.mpi_threads_supported()


def test_nccl_built_is_the_nccl_torch_loaded():
    """With the device library loaded after torch, both use the one libnccl.so.2 in the
    process: torch's (docs/gpu.md, "Which libnccl")."""
    if not hvd.cuda_built():
        assert hvd.nccl_built() == 0
        return
    try:
        major, minor, patch = torch.cuda.nccl.version()
    except Exception:  # a torch without NCCL: the system's is the one
        assert hvd.nccl_built() >= 21400
        return
    assert hvd.nccl_built() == major * 10000 + minor * 100 + patch


def test_ops_constants():
    assert (hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max, hvd.Product) == (0, 1, 2, 3, 4, 5)
    # Adasum of one gradient on every rank (parallel gradients) is that gradient.
    assert torch.equal(hvd.allreduce(torch.ones(3), op=hvd.Adasum), torch.ones(3))
    with pytest.raises(ValueError, match="supersedes"):
        hvd.allreduce(torch.ones(3), average=True, op=hvd.Sum)


def test_shutdown_reinit_and_use_before_init():
    hvd.barrier()
    hvd.shutdown()
    assert not hvd.is_initialized()
    hvd.shutdown()  # twice is fine
    with pytest.raises(ValueError, match="has not been initialized"):
        hvd.rank()
    with pytest.raises(ValueError, match="has not been initialized"):
        hvd.allreduce(torch.ones(2))
    for _ in range(2):
        hvd.init()
        t = hvd.allreduce(torch.ones(4) * hvd.rank(), op=hvd.Sum, name="reinit")
        assert t.tolist() == [sum(range(hvd.size()))] * 4
        hvd.barrier()
        hvd.shutdown()
    hvd.init()
    assert hvd.is_initialized()


def test_static_process_sets_at_init():
    size = hvd.size()
    hvd.barrier()
    hvd.shutdown()
    evens = hvd.ProcessSet(range(0, size, 2))
    odds = hvd.ProcessSet(range(1, size, 2))
    hvd.init(process_sets=[evens, odds])
    try:
        assert evens.process_set_id == 1 and odds.process_set_id == 2
        mine = evens if hvd.rank() % 2 == 0 else odds
        other = odds if mine is evens else evens
        assert mine.included() and not other.included()
        assert mine.size() == len(mine.ranks)
        assert mine.rank() == mine.ranks.index(hvd.rank())
        out = hvd.allreduce(torch.tensor([float(hvd.rank())]), op=hvd.Sum, process_set=mine)
        assert out.item() == sum(mine.ranks)
        with pytest.raises(ValueError):
            hvd.allreduce(torch.ones(1), process_set=other)
        assert hvd.global_process_set.ranks == list(range(size))
    finally:
        hvd.barrier()
        hvd.shutdown()
        hvd.init()
    assert evens.process_set_id is None


def test_shutdown_with_operations_in_flight():
    """Operations still in flight at shutdown fail; what they read and write is dropped by the
    binding only once the runtime has stopped (before, the coordinator could still be copying
    into an output the binding had already freed: a crash at exit)."""
    from hvdsparse.common import basics
    seen = []

    def hook(event):
        if event == "shutdown":
            seen.append(hvd.is_initialized())
    basics.register_reset_hook(hook)
    big = torch.ones(1 << 18)
    handles = []
    size = hvd.size()  # read before shutdown: after it, size() raises
    hvd.barrier()
    try:
        # Names of this rank alone: no other rank submits them, so they stay in flight.
        for i in range(8):
            handles.append(hvd.allgather_async(big, name="inflight.%d.%d" % (hvd.rank(), i)))
    except HorovodInternalError:
        pass  # another rank shut down first
    finally:
        hvd.shutdown()
        basics._reset_hooks.remove(hook)
    assert seen == [False]
    assert handles or size > 1  # only another rank's shutdown may refuse the first one
    hvd.init()


def test_exit_with_operations_in_flight_is_clean(tmp_path):
    """A script that ends with allgathers in flight exits with status 0 (one rank, no
    launcher), several times in a row."""
    import subprocess
    import sys
    script = tmp_path / "exit_pending.py"
    script.write_text(
        "import torch\n"
        "import hvdsparse.torch as hvd\n"
        "hvd.init()\n"
        "t = torch.randn(1 << 18)\n"
        "hs = [hvd.allgather_async(t, name='pending.%d' % i) for i in range(24)]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOROVOD_", "HVDSPARSE_"))}
    env.update(HVDSPARSE_SIZE="1", HVDSPARSE_RANK="0")
    for _ in range(6):
        done = subprocess.run([sys.executable, str(script)], env=env, timeout=60,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]


def test_forked_child_cannot_communicate_and_leaves_the_job_intact():
    """A process forked after init (a data loader's worker, a plain fork) answers queries, fails
    collectives with a clear error, and its shutdown (atexit's, at its exit) leaves the parent's
    runtime running: it holds a copy of the runtime, whose connections are the parent's."""
    import json
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.close(r)
            info = {"rank": hvd.rank(), "size": hvd.size(), "error": None}
            try:
                hvd.allreduce(torch.ones(2), name="from.child")
            except Exception as e:  # noqa: BLE001 - reported to the parent
                info["error"] = "%s: %s" % (type(e).__name__, e)
            hvd.shutdown()  # what atexit runs when a forked child exits normally
            info["initialized_after_shutdown"] = hvd.is_initialized()
            os.write(w, json.dumps(info).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r) as f:
        info = json.loads(f.read())
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert (info["rank"], info["size"]) == (hvd.rank(), hvd.size())
    assert info["error"] is not None
    assert "forked from rank %d" % hvd.rank() in info["error"], info["error"]
    # The parent's runtime is untouched.
    assert hvd.is_initialized()
    t = hvd.allreduce(torch.ones(3) * (hvd.rank() + 1), op=hvd.Sum, name="after.fork")
    assert t.tolist() == [float(sum(range(1, hvd.size() + 1)))] * 3
