"""The framework-neutral helpers both bindings call, on plain Python values."""
import sys
import subprocess
import warnings

import numpy as np
import pytest

from hvdsparse.common import objects
from hvdsparse.common.compression import compression_namespace
from hvdsparse.common.gradients import reducescatter_grad
from hvdsparse.common.ops import Average, Max, Sum, predivide_scales, resolve_op
from hvdsparse.common import process_sets
from hvdsparse.common.process_sets import ProcessSet, root_index, set_id
from hvdsparse.common.splits import check_splits


def test_resolve_op():
    assert resolve_op(None, None) == Average
    assert resolve_op(None, Max) == Max
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resolve_op(None, Sum)  # no warning without `average`
    with pytest.warns(DeprecationWarning):
        assert resolve_op(False, None) == Sum
    with pytest.warns(DeprecationWarning):
        assert resolve_op(True, None) == Average
    with pytest.raises(ValueError, match="supersedes"):
        resolve_op(True, Sum)


def test_predivide_scales():
    assert predivide_scales(Average, 4.0) == (0.25, 4.0)
    assert predivide_scales(Sum, 1.0) == (1.0, 1.0)
    with pytest.raises(ValueError, match="gradient_predivide_factor"):
        predivide_scales(Sum, 2.0)


def test_set_id_and_root_index(monkeypatch):
    unregistered = ProcessSet([2, 0])
    with pytest.raises(ValueError, match="has not been registered"):
        set_id(unregistered)
    with pytest.raises(ValueError, match="has not been registered"):
        root_index(0, unregistered)
    registered = ProcessSet([4, 2])
    registered.process_set_id = 3
    monkeypatch.setitem(process_sets._registered, 3, registered)  # as add_process_set would
    assert set_id(registered) == 3
    assert root_index(4, registered) == 1  # the rank within the sorted set
    with pytest.raises(ValueError, match="not a member"):
        root_index(0, registered)


class _CommLike:
    """Shaped like an mpi4py communicator, for the checks that run without mpi4py."""

    def Get_rank(self):
        return 0

    def Get_size(self):
        return 1

    def Get_group(self):
        return None


def test_comm_without_mpi4py(monkeypatch):
    from hvdsparse.common import basics, mpi_comm
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # `from mpi4py import MPI` fails
    with pytest.raises(NotImplementedError, match="pip install mpi4py"):
        ProcessSet(_CommLike())
    with pytest.raises(NotImplementedError, match="pip install mpi4py"):
        mpi_comm.world_comm([0, 1])  # init(comm=[...]) before it starts anything
    with pytest.raises(ValueError, match="communicator or a list of ranks"):
        basics.init(comm=object())


def test_comm_host_labels():
    from hvdsparse.common.mpi_comm import _host_labels
    # Shared-memory nodes by their first rank; a name two nodes report is made unique.
    assert _host_labels({(0, "a"), (2, "b"), (4, "a")}) == {0: "a-0", 2: "b", 4: "a-4"}


def test_check_splits():
    assert check_splits(None, 6, 3) is None
    assert check_splits(np.array([1, 0, 5]), 6, 3) == [1, 0, 5]
    assert check_splits([2, 2], None, 2) == [2, 2]  # rows not known yet: checked later
    for splits, dim0 in [(None, 7), ([1, 2], 6), ([-1, 4, 3], 6), ([1, 1, 1], 6)]:
        with pytest.raises(KeyError):
            check_splits(splits, dim0, 3, error=KeyError)


def test_reducescatter_grad_factor():
    class _Set:
        def size(self):
            return 3

    def gather(g, ps):
        return [g] * ps.size()

    def scale(g, f):
        return [x * f for x in g]
    assert reducescatter_grad(1.0, Average, 1.0, 1.0, _Set(), gather, scale) == [1.0] * 3
    assert reducescatter_grad(1.0, Sum, 1.0, 1.0, _Set(), gather, scale) == [3.0] * 3
    assert reducescatter_grad(1.0, Average, 0.5, 4.0, _Set(), gather, scale) == [2.0] * 3


def test_object_protocol_names_and_dtypes(monkeypatch):
    """Two operations per object, "<name>.sz" (int64 byte count) then "<name>.t" (uint8), named
    after the object's type by default; the root keeps its own object."""
    sent = []

    def root_side(array, root, name, ps):
        sent.append((name, array.dtype, array.copy()))
        return array
    monkeypatch.setattr(objects.basics, "rank", lambda: 0)
    obj = {"a": [1, 2]}
    assert objects.broadcast_object(obj, 0, None, "ps", root_side) is obj
    assert [(n, d) for n, d, _ in sent] == [("dict.sz", np.int64), ("dict.t", np.uint8)]
    received = iter([sent[0][2], sent[1][2]])
    monkeypatch.setattr(objects.basics, "rank", lambda: 1)
    assert objects.broadcast_object(None, 0, "dict", "ps", lambda *a: next(received)) == obj

    def gather_two(array, name, ps):  # this rank and one peer holding the same object
        return np.concatenate([array, array])
    assert objects.allgather_object(obj, "g", "ps", gather_two) == [obj, obj]


def test_compression_namespace():
    ns = compression_namespace(np.float16, np.float32, lambda a: a.dtype.kind == "f",
                               lambda a, d: a.astype(d), lambda ratio, **o: ("topk", ratio, o))
    sent, ctx = ns.fp16.compress(np.ones(2, np.float64))
    assert sent.dtype == np.float16 and ns.fp16.decompress(sent, ctx).dtype == np.float64
    assert ns.fp16.compress(np.ones(2, np.int32))[1] is None  # integers travel as they are
    assert ns.fp16.__name__ == "FP16Compressor" and ns.bf16.__name__ == "BF16Compressor"
    assert ns.none.compress("t") == ("t", None)
    assert ns.topk(0.1, seed=3) == ("topk", 0.1, {"seed": 3})


def test_common_package_imports_no_framework():
    code = ("import sys, pkgutil, importlib, hvdsparse.common as c\n"
            "for m in pkgutil.iter_modules(c.__path__):\n"
            "    importlib.import_module('hvdsparse.common.' + m.name)\n"
            "bad = [f for f in ('torch', 'tensorflow') if f in sys.modules]\n"
            "sys.exit('imported %s' % bad if bad else 0)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_horovod_common_util_helpers():
    """horovod.common.util's helpers, as Horovod's tests and scripts import them."""
    import os

    from hvdsparse.common import util
    assert util.is_version_greater_equal_than("2.20.0", "2.6.0")
    assert not util.is_version_greater_equal_than("2.5.1", "2.6.0")
    with pytest.raises(ValueError):
        util.is_version_greater_equal_than("2.6", "2.6")
    assert util.split_list(list(range(7)), 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert util.num_rank_is_power_2(4) and not util.num_rank_is_power_2(6)
    assert util.is_iterable([1]) and not util.is_iterable(3)
    assert util.gloo_built() and not util.mpi_built()
    binding = os.environ.get("HVDSPARSE_TEST_BINDING", "torch")
    assert util.extension_available(binding) and not util.extension_available("mxnet")
    os.environ.pop("HVDS_UTIL_TEST", None)
    with util.env(HVDS_UTIL_TEST="1", HVDS_UTIL_UNSET=None):
        assert os.environ["HVDS_UTIL_TEST"] == "1" and "HVDS_UTIL_UNSET" not in os.environ
    assert "HVDS_UTIL_TEST" not in os.environ
