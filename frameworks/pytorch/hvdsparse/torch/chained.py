"""Operations made of collectives in a row, each shaped by the one before's result (a split
sparse allreduce: an alltoall of the pairs to their owners, then an allgather of what each owner
summed; recursive doubling: one exchange per round). The caller enqueues the first; one
background thread waits for the first operations in the order they were enqueued and enqueues
each one's second. So no second collective waits on the order in which ranks call
synchronize(), which may differ: every rank enqueues every first at once, and every second once
its first is done everywhere. A chain of three or more continues on a thread of its own from
its second on: the shared thread waits only for firsts, which every rank enqueued already, so a
rank that took two chains in another order than the others never holds a later step of one
back while it waits on the other's. synchronize() on the returned ChainedHandle waits for the
last and returns its result; a failure of any raises there. On a GPU the threads work on the
caller's stream, as the caller would have.

A failure of this rank's own work between two collectives (the finish of one, the step that
builds the next: a GPU allocation, a check) would leave the other ranks waiting for a collective
this rank never enqueues. So each step comes with a poison: the next collective enqueued under
its name with int8 elements, which fails negotiation on every rank that enqueued the real one
("Mismatched data types: One rank had type UINT8, but another rank had type INT8", naming
the tensor and the ranks), so that every rank's synchronize raises and nobody waits; this rank
raises its own failure. A collective that failed
needs no poison: the runtime failed it on every rank; nor does an AgreedFailure, which every
rank finds in the data they all received (a rank that asked for another algorithm may have no
next collective to meet a poison)."""
import contextlib
import queue
import threading

import torch

from hvdsparse.common import _lib, handles
from hvdsparse.common.exceptions import HorovodInternalError
from hvdsparse.torch.dense_enqueue import _gather_like
from hvdsparse.torch.handles import _poll_one, _register, _synchronize_one

_pending = queue.Queue()
_worker = []  # the thread, once started
_start_lock = threading.Lock()


class AgreedFailure(ValueError):
    """A failure every rank of the operation finds in the same received data (the header rows
    of the first collective)."""


class More:
    """What a step returns when another collective follows: its registered handle, the step
    that takes its result, and that step's poison (see above; None: the step cannot fail
    alone)."""

    def __init__(self, handle, then, poison=None):
        self.handle, self.then, self.poison = handle, then, poison


def poison(kind, c_fn, name, process_set, device, width=0, splits=None):
    """Enqueues c_fn (hvds_allgather_async or hvds_alltoall_async; splits for the latter) on an
    empty int8 tensor under the name a chain's next collective has (kind, name as for
    _gather_like) and returns its registered handle."""
    empty = torch.zeros((0, width) if width else (0,), dtype=torch.int8, device=device)
    h, key, keep = _gather_like(kind, c_fn, empty, name, process_set, splits)
    return _register(h, keep, lambda hh: None, key)


class ChainedHandle:
    """What a chained operation returns: pass it to hvd.synchronize() or hvd.poll()."""

    def __init__(self, name):
        self.name = name
        self._second = None  # the second collective's handle, once enqueued
        self._queued = threading.Event()
        self._done, self._result, self._error = False, None, None

    def __call__(self):
        if not self._done:
            self._queued.wait()
            self._done = True
            try:
                if self._error is None:
                    self._result = _synchronize_one(self._second)
            except Exception as e:  # noqa: BLE001 - raised to the caller below, every time
                self._error = e
        if self._error is not None:
            raise self._error
        return self._result

    def poll(self):
        if self._done:
            return True
        if not self._queued.is_set():
            return False
        return self._error is not None or _poll_one(self._second)


def _stream_of(stream):
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


def _step(handle, then, chained, which, poison_next=None):
    """then(handle's result): the next collective's handle, or a More. When this rank's own part
    fails after the collective succeeded, poison_next() tells the other ranks first."""
    collective_ok = handles.wait(handle) == _lib.SUCCESS
    try:
        result = _synchronize_one(handle)
        if result is None:  # the handle map was cleared: hvd.shutdown() or a reset
            raise HorovodInternalError(
                "hvdsparse: '%s': the runtime was shut down or reset before its %s collective "
                "finished" % (chained.name, which))
        return then(result)
    except Exception as e:
        if collective_ok and poison_next is not None and not isinstance(e, AgreedFailure):
            _tell_the_others(poison_next)
        raise


def _tell_the_others(poison_next):
    """Enqueues the poison and waits for it: the others fail on it; where every rank failed
    alike (a check every rank made), the int8 collective runs and does nothing."""
    try:
        _synchronize_one(poison_next())
    except Exception:  # noqa: BLE001 - the mismatch is the point; this rank raises its own
        pass


def _follow(chained, stream, nxt):
    """The rest of a longer chain, on its own thread: each More's collective awaited and its
    step run, then the last handle, or the failure, handed to the caller's synchronize()."""
    try:
        with _stream_of(stream):
            while isinstance(nxt, More):
                nxt = _step(nxt.handle, nxt.then, chained, "next", nxt.poison)
        chained._second = nxt
    except Exception as e:  # noqa: BLE001 - handed to the caller's synchronize()
        chained._error = e
    chained._queued.set()


def _run():
    while True:
        first, then, chained, stream, poison_next = _pending.get()
        try:
            with _stream_of(stream):
                nxt = _step(first, then, chained, "first", poison_next)
        except Exception as e:  # noqa: BLE001 - handed to the caller's synchronize()
            chained._error = e
            chained._queued.set()
            continue
        if isinstance(nxt, More):  # a longer chain: its own thread from here
            threading.Thread(target=_follow, args=(chained, stream, nxt),
                             name="hvdsparse-chained-" + chained.name, daemon=True).start()
        else:
            _follow(chained, stream, nxt)


def chain(first, then, name, stream=None, poison_next=None):
    """A ChainedHandle for first (a registered handle) followed by then(first's result), which
    enqueues the second collective and returns its registered handle, or a More when a third
    follows the second (and so on). stream: the caller's current CUDA stream, which the threads
    work on (None on the CPU). poison_next: the second collective's poison (see above)."""
    chained = ChainedHandle(name)
    with _start_lock:
        if not _worker:
            t = threading.Thread(target=_run, name="hvdsparse-chained", daemon=True)
            t.start()
            _worker.append(t)
    _pending.put((first, then, chained, stream, poison_next))
    return chained
