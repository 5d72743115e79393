"""What the bindings' gradient functions share; the framework lends its tensor operations."""
from hvdsparse.common.ops import Sum


def reducescatter_grad(grad, op, prescale, postscale, process_set, allgather, scale):
    """The gradient of a reducescatter, as Horovod's: the gathered gradients of every rank's
    slice (allgather(grad, process_set)), times prescale * postscale, and times the set's size
    for Sum. scale(tensor, factor) is the framework's multiplication."""
    gathered = allgather(grad, process_set)
    factor = prescale * postscale * (process_set.size() if op == Sum else 1)
    return scale(gathered, factor) if factor != 1 else gathered
