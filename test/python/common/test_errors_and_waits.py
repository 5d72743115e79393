"""The one mapping from C statuses to Python exceptions, and the wait loop, against a stand-in
for the C library (no runtime needed)."""
import pytest

from hvdsparse.common import _lib, handles
from hvdsparse.common.errors import ErrorClasses, NOT_INITIALIZED, call_error, operation_error
from hvdsparse.common.exceptions import HorovodInternalError


class _Narrowed(ErrorClasses):
    """What a framework with error types of its own does (TensorFlow's)."""

    class invalid_argument(ValueError):
        pass

    class precondition(HorovodInternalError):
        pass

    class aborted(HorovodInternalError):
        pass

    class unknown(HorovodInternalError):
        pass


OPERATION_KINDS = [(_lib.INVALID_ARGUMENT, "invalid_argument"),
                   (_lib.PRECONDITION_ERROR, "precondition"), (_lib.SHUT_DOWN, "aborted"),
                   (_lib.REMOTE_ERROR, "aborted"), (_lib.TIMEOUT, "unknown"),
                   (_lib.SYSTEM_ERROR, "unknown"), (_lib.INTERNAL_ERROR, "unknown")]


@pytest.mark.parametrize("classes", [ErrorClasses, _Narrowed])
@pytest.mark.parametrize("rc,kind", OPERATION_KINDS)
def test_operation_error_kinds(classes, rc, kind):
    e = operation_error(rc, "why", classes)
    assert type(e) is getattr(classes, kind) and str(e) == "why"
    assert isinstance(e, ValueError if kind == "invalid_argument" else HorovodInternalError)


@pytest.mark.parametrize("classes", [ErrorClasses, _Narrowed])
def test_call_error_kinds(classes):
    not_init = call_error(_lib.INVALID_USAGE, "Horovod has not been initialized; use hvd.init().",
                          classes)
    assert type(not_init) is ValueError and str(not_init) == NOT_INITIALIZED
    assert type(call_error(_lib.INVALID_USAGE, "misuse", classes)) is classes.invalid_argument
    assert type(call_error(_lib.INVALID_ARGUMENT, "bad", classes)) is classes.invalid_argument
    assert type(call_error(_lib.NOT_SUPPORTED, "no", classes)) is NotImplementedError
    assert type(call_error(_lib.SHUT_DOWN, "gone", classes)) is classes.aborted
    assert type(call_error(_lib.PRECONDITION_ERROR, "differ", classes)) is classes.precondition


class _FakeLib:
    """hvds_wait / hvds_poll of one handle: pending for `slices` wait slices, then done with
    `status`; calls are recorded."""

    def __init__(self, slices, status):
        self.slices, self.status, self.calls = slices, status, []

    def hvds_poll(self, handle):
        self.calls.append(("poll",))
        return 1 if self.slices <= 0 else 0

    def hvds_wait(self, handle, timeout_ms):
        self.calls.append(("wait", timeout_ms))
        if self.slices > 0 and timeout_ms != 0:
            self.slices -= 1
            return _lib.TIMEOUT
        return self.status if self.slices <= 0 else _lib.TIMEOUT

    def hvds_handle_error(self, handle):
        return b""

    def hvds_result_str(self, rc):
        return b"timeout" if rc == _lib.TIMEOUT else b"other"


def test_wait_goes_on_while_pending(monkeypatch):
    fake = _FakeLib(slices=3, status=_lib.SUCCESS)
    monkeypatch.setattr(_lib, "_lib", fake)
    assert handles.wait(7) == _lib.SUCCESS
    assert fake.calls == [("wait", handles.WAIT_SLICE_MS), ("poll",)] * 3 + [("wait", 0)]


def test_wait_returns_an_operations_own_timeout(monkeypatch):
    """Done with status HVDS_TIMEOUT: returned (and raised), not waited on forever."""
    fake = _FakeLib(slices=0, status=_lib.TIMEOUT)
    monkeypatch.setattr(_lib, "_lib", fake)
    assert handles.wait(7) == _lib.TIMEOUT
    assert fake.calls[-1] == ("wait", 0)
    with pytest.raises(_Narrowed.unknown, match="timeout"):
        handles.wait_or_raise(7, _Narrowed)


def test_finish_all_finishes_every_item_then_raises_the_first_failure():
    finished = []

    def finish(i):
        finished.append(i)
        if i in (1, 2):
            raise RuntimeError("item %d" % i)
        return i
    with pytest.raises(RuntimeError, match="item 1"):
        handles.finish_all([0, 1, 2, 3], finish)
    assert finished == [0, 1, 2, 3]
    assert handles.finish_all([4, 5], lambda i: i * 2) == [8, 10]
