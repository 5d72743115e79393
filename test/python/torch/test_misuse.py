"""Misuse through the torch binding: a clear Python exception or the correct result, never a
crash, and the runtime still usable afterwards. NaN and Inf follow IEEE arithmetic; zero-size
tensors give empty results. Every rank runs every test, in the same order."""
import math

import pytest
import torch

import hvdsparse.torch as hvd
from hvdsparse.common.exceptions import HorovodInternalError

FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def _still_usable(name):
    out = hvd.allreduce(torch.ones(3), op=hvd.Sum, name=name)
    assert out.tolist() == [hvd.size()] * 3


@pytest.mark.parametrize("bad", [None, [1.0, 2.0], 3.5, "tensor"])
def test_not_a_tensor(bad):
    for fn in (hvd.allreduce, hvd.allgather, hvd.reducescatter):
        with pytest.raises((ValueError, TypeError)):
            fn(bad)
    with pytest.raises((ValueError, TypeError)):
        hvd.broadcast(bad, root_rank=0)


def test_unsupported_dtype_and_dims():
    with pytest.raises(ValueError):
        hvd.allreduce(torch.zeros(4, dtype=torch.complex64), name="misuse.complex")
    with pytest.raises(ValueError):
        hvd.allreduce(torch.zeros([1] * 9), name="misuse.ninedims")
    _still_usable("misuse.after.dtype")


def test_unknown_and_unsupported_ops():
    with pytest.raises(ValueError):
        hvd.allreduce(torch.ones(2), op=42, name="misuse.op42")
    with pytest.raises(ValueError, match="Adasum reduces float16, bfloat16, float32 and float64"):
        hvd.allreduce(torch.ones(2, dtype=torch.int32), op=hvd.Adasum, name="misuse.adasum")
    with pytest.raises(NotImplementedError, match="Adasum applies to allreduce only"):
        hvd.reducescatter(torch.ones(2 * hvd.size()), op=hvd.Adasum, name="misuse.adasum.rs")
    _still_usable("misuse.after.ops")


@pytest.mark.parametrize("root", [-1, "size", 10 ** 6])
def test_broadcast_root_out_of_range(root):
    root = hvd.size() if root == "size" else root
    with pytest.raises(ValueError):
        hvd.broadcast(torch.ones(3), root_rank=root, name="misuse.root.%d" % root)
    _still_usable("misuse.after.root.%d" % root)


def test_alltoall_bad_splits():
    x = torch.arange(4.0)
    n = hvd.size()
    bad = [[4] + [0] * n,                    # one split too many
           [-1] + [0] * (n - 2) + [5] if n > 1 else [-1],
           [100] * n]                        # more rows than the tensor has
    for i, splits in enumerate(bad):
        with pytest.raises(ValueError):
            hvd.alltoall(x, splits=splits, name="misuse.a2a.%d" % i)
    with pytest.raises(ValueError):
        hvd.alltoall(x, splits=torch.tensor([4.0] + [0.0] * (n - 1)), name="misuse.a2a.float")
    with pytest.raises(ValueError):
        hvd.alltoall(torch.tensor(1.0), name="misuse.a2a.scalar")
    _still_usable("misuse.after.a2a")


def test_reducescatter_scalar():
    with pytest.raises(ValueError):
        hvd.reducescatter(torch.tensor(2.0), name="misuse.rs.scalar")
    _still_usable("misuse.after.rs")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
def test_nan_and_inf_propagate_like_ieee_sums(dtype, op):
    r, n = hvd.rank(), hvd.size()
    x = torch.ones(4, dtype=dtype)
    if r == 0:
        x[0] = math.nan
        x[1] = math.inf
        x[2] = math.inf
    if r == 1:
        x[2] = -math.inf
    out = hvd.allreduce(x, op=op, name="misuse.nan.%s.%d" % (dtype, op)).double()
    assert math.isnan(out[0])                        # NaN + x = NaN
    assert out[1] == math.inf                        # Inf + x = Inf
    assert math.isnan(out[2]) if n > 1 else out[2] == math.inf  # Inf + -Inf = NaN
    assert out[3] == (n if op == hvd.Sum else 1)      # the finite element is untouched


def test_zero_size_tensors():
    n, r = hvd.size(), hvd.rank()
    assert hvd.allreduce(torch.empty(0), name="misuse.zero.ar").shape == (0,)
    assert hvd.allreduce(torch.empty(0, 5), name="misuse.zero.ar2").shape == (0, 5)
    rows = torch.full((0 if r == 0 else 1, 3), float(r))
    gathered = hvd.allgather(rows, name="misuse.zero.ag")
    assert gathered.shape == (n - 1, 3)
    assert gathered[:, 0].tolist() == [float(k) for k in range(1, n)]
    assert hvd.broadcast(torch.empty(0), root_rank=0, name="misuse.zero.bc").shape == (0,)
    out, received = hvd.alltoall(torch.empty(0, 2), splits=[0] * n, name="misuse.zero.a2a")
    assert out.shape == (0, 2) and received.tolist() == [0] * n
    assert hvd.reducescatter(torch.empty(0, 3), name="misuse.zero.rs").shape == (0, 3)
    outs = hvd.grouped_allreduce([torch.empty(0), torch.ones(2)], op=hvd.Sum,
                                 name="misuse.zero.group")
    assert outs[0].shape == (0,) and outs[1].tolist() == [n, n]


def test_unknown_handles():
    assert hvd.poll(987654321) is True
    assert hvd.synchronize(987654321) is None
    _still_usable("misuse.after.handles")


def test_unregistered_process_set():
    with pytest.raises(ValueError):
        hvd.allreduce(torch.ones(2), process_set=hvd.ProcessSet([0]), name="misuse.ps")
    _still_usable("misuse.after.ps")


def test_failed_operation_raises_and_runtime_goes_on():
    # Ranks disagree on the dtype: every rank gets an error naming the mismatch, not a hang.
    dtype = torch.float32 if hvd.rank() == 0 else torch.float64
    if hvd.size() > 1:
        with pytest.raises((HorovodInternalError, ValueError), match="Mismatched data types"):
            hvd.allreduce(torch.ones(2, dtype=dtype), name="misuse.mismatch")
    _still_usable("misuse.after.mismatch")
