"""Reduction operations, numbered as Horovod's ReduceOp (and as hvds_reduce_op_t)."""

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
    """Raises for ops hvdsparse cannot run; returns op otherwise."""
    if op == Adasum:
        raise NotImplementedError(
            "Adasum is not supported by hvdsparse; use op=hvd.Average or op=hvd.Sum.")
    if op not in _NAMES:
        raise ValueError("Unknown reduction operation: %r" % (op,))
    return op
