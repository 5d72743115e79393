"""Reduction operations, numbered as Horovod's ReduceOp (and as hvds_reduce_op_t), and the
checks every binding makes of the op a call asks for."""
import warnings

Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5

_NAMES = {Average: "Average", Sum: "Sum", Adasum: "Adasum", Min: "Min", Max: "Max",
          Product: "Product"}


def op_name(op):
    return _NAMES.get(op, str(op))


def check_op(op):
    """Raises for ops hvdsparse cannot run; returns op otherwise (Adasum: allreduce of float
    tensors only, which the runtime checks)."""
    if op not in _NAMES:
        raise ValueError("Unknown reduction operation: %r" % (op,))
    return op


def resolve_op(average, op):
    """The op of a call given Horovod's deprecated `average` flag or `op` (not both): average
    still works but warns, as Horovod's does in every framework; neither means Average."""
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed in "
                      "v1.0", DeprecationWarning, stacklevel=3)
        op = Average if average else Sum
    return check_op(Average if op is None else op)


def check_sparse_op(op):
    """Sparse tensors reduce with Sum or Average only (NotImplementedError, Horovod's text)."""
    if op == Adasum:
        raise NotImplementedError("The Adasum reduction does not currently support sparse "
                                  "tensors. As a workaround please pass sparse_as_dense=True "
                                  "to DistributedOptimizer")
    if op not in (Average, Sum):
        raise NotImplementedError("Only Sum and Average ops are supported with sparse tensors")


def predivide_scales(op, gradient_predivide_factor):
    """(prescale, postscale) of an optimizer's gradient_predivide_factor f: Average divides by f
    before the sum and multiplies by f after it; any other op takes no factor."""
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if op == Average:
        return 1.0 / gradient_predivide_factor, gradient_predivide_factor
    return 1.0, 1.0
