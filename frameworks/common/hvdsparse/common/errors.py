"""Which Python exception a failed C call raises: one mapping for every binding, Horovod's.

A call refused at once (init, an enqueue) raises where it is made, as Horovod raises at the
*_async call; an operation that failed later raises when it is waited for. The kind of failure
picks the class; ErrorClasses holds Horovod's PyTorch classes, and a binding whose framework
has error types of its own narrows them in a subclass.
"""
from hvdsparse.common import _lib
from hvdsparse.common.exceptions import HorovodInternalError

NOT_INITIALIZED = "Horovod has not been initialized; use hvd.init()."


class ErrorClasses:
    """The class raised for each kind of failure. A subclass may replace each one only by a
    subclass of it, so that `except ValueError` and `except HorovodInternalError` catch the same
    failures in every binding."""
    invalid_argument = ValueError  # bad arguments: a duplicate name, bad splits
    precondition = HorovodInternalError  # ranks disagreed: shape, dtype, op, root rank
    aborted = HorovodInternalError  # a peer died or the runtime shut down
    unknown = HorovodInternalError  # anything else, a transport timeout among them


def operation_error(rc, message, classes=ErrorClasses):
    """The exception for an operation that ended with status rc."""
    message = message or _lib.result_str(rc)
    if rc == _lib.INVALID_ARGUMENT:
        return classes.invalid_argument(message)
    if rc == _lib.PRECONDITION_ERROR:
        return classes.precondition(message)
    if rc in (_lib.SHUT_DOWN, _lib.REMOTE_ERROR):
        return classes.aborted(message)
    return classes.unknown(message)


def call_error(rc, message, classes=ErrorClasses):
    """The exception for a C call that refused with rc: misuse is a ValueError (Horovod's own
    text before init), a feature this build lacks NotImplementedError, anything else as for a
    failed operation."""
    message = message or _lib.result_str(rc)
    if rc == _lib.INVALID_USAGE and "not been initialized" in message:
        return ValueError(NOT_INITIALIZED)
    if rc in (_lib.INVALID_ARGUMENT, _lib.INVALID_USAGE):
        return classes.invalid_argument(message)
    if rc == _lib.NOT_SUPPORTED:
        return NotImplementedError(message)
    return operation_error(rc, message, classes)
