"""Runtime operations by handle, as every binding runs them: start one, wait for it, read its
outputs, finish a batch of them, and the two operations without tensors (join and barrier).
Errors are raised through errors.py; `classes` is the binding's ErrorClasses."""
import ctypes

from hvdsparse.common import _lib, basics
from hvdsparse.common.errors import ErrorClasses, call_error, operation_error

WAIT_SLICE_MS = 1000  # a wait returns to Python this often, so that Ctrl-C is seen


def enqueue(fn, *args, classes=ErrorClasses):
    """Calls the hvds_*_async function fn(*args, &handle) and returns the handle; a refusal
    raises here, at the call, as Horovod raises it."""
    handle = ctypes.c_int64(0)
    rc = fn(*args, ctypes.byref(handle))
    if rc != _lib.SUCCESS:
        raise call_error(rc, _lib.last_error(), classes)
    return handle.value


def wait(handle):
    """Waits for the operation and returns its status. HVDS_TIMEOUT ends a slice of the wait,
    but it is also the status of an operation that failed on a transport timeout: when the
    operation is done, that status is returned instead of waiting again (forever)."""
    lib = _lib.lib()
    while True:
        rc = lib.hvds_wait(handle, WAIT_SLICE_MS)
        if rc != _lib.TIMEOUT:
            return rc
        if lib.hvds_poll(handle) == 1:
            return lib.hvds_wait(handle, 0)


def wait_or_raise(handle, classes=ErrorClasses):
    """Waits for the operation; a failure raises with the handle's message. The handle stays
    to be released."""
    rc = wait(handle)
    if rc != _lib.SUCCESS:
        raise operation_error(rc, _lib.handle_error(handle), classes)


def output(handle, i):
    """The hvds_tensor_t of output i of a finished operation."""
    view = _lib.Tensor()
    basics.check(_lib.lib().hvds_handle_output(handle, i, ctypes.byref(view)), "output")
    return view


def received_splits(handle):
    """The rows alltoall received from each rank of the set, as a list."""
    ptr = ctypes.POINTER(ctypes.c_int32)()
    n = _lib.lib().hvds_handle_splits(handle, ctypes.byref(ptr))
    return [ptr[i] for i in range(max(n, 0))]


def finish_all(items, finish):
    """[finish(item) for item in items], going on after a failure so that nothing is left in
    flight (a failed item gives None); then raises the first failure."""
    results, error = [], None
    for item in items:
        try:
            results.append(finish(item))
        except Exception as e:  # noqa: BLE001 - raised below, once every item is finished
            error = error or e
            results.append(None)
    if error is not None:
        raise error
    return results


def _run(fn, args, result, classes):
    """Starts fn(*args), an operation without tensors, waits for it, returns result(handle)
    and releases the handle."""
    basics.require_init()
    handle = enqueue(fn, *args, classes=classes)
    try:
        wait_or_raise(handle, classes)
        return result(handle)
    finally:
        _lib.lib().hvds_release(handle)


def join(classes=ErrorClasses):
    """This rank has no more batches (hvds_join_async); returns the last rank that joined."""
    lib = _lib.lib()
    return _run(lib.hvds_join_async, (), lambda h: int(lib.hvds_handle_join_rank(h)), classes)


def barrier(process_set_id, classes=ErrorClasses):
    """Returns once every rank of the set reached the barrier."""
    _run(_lib.lib().hvds_barrier_async, (process_set_id,), lambda _h: None, classes)
