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
caller's stream, as the caller would have."""
import contextlib
import queue
import threading

import torch

from hvdsparse.common.exceptions import HorovodInternalError
from hvdsparse.torch.handles import _poll_one, _synchronize_one

_pending = queue.Queue()
_worker = []  # the thread, once started
_start_lock = threading.Lock()


class More:
    """What a step returns when another collective follows: its registered handle, and the
    step that takes its result."""

    def __init__(self, handle, then):
        self.handle, self.then = handle, then


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


def _step(handle, then, chained, which):
    """then(handle's result): the next collective's handle, or a More."""
    result = _synchronize_one(handle)
    if result is None:  # the handle map was cleared: hvd.shutdown() or a reset
        raise HorovodInternalError(
            "hvdsparse: '%s': the runtime was shut down or reset before its %s collective "
            "finished" % (chained.name, which))
    return then(result)


def _follow(chained, stream, nxt):
    """The rest of a longer chain, on its own thread: each More's collective awaited and its
    step run, then the last handle, or the failure, handed to the caller's synchronize()."""
    try:
        with _stream_of(stream):
            while isinstance(nxt, More):
                nxt = _step(nxt.handle, nxt.then, chained, "next")
        chained._second = nxt
    except Exception as e:  # noqa: BLE001 - handed to the caller's synchronize()
        chained._error = e
    chained._queued.set()


def _run():
    while True:
        first, then, chained, stream = _pending.get()
        try:
            with _stream_of(stream):
                nxt = _step(first, then, chained, "first")
        except Exception as e:  # noqa: BLE001 - handed to the caller's synchronize()
            chained._error = e
            chained._queued.set()
            continue
        if isinstance(nxt, More):  # a longer chain: its own thread from here
            threading.Thread(target=_follow, args=(chained, stream, nxt),
                             name="hvdsparse-chained-" + chained.name, daemon=True).start()
        else:
            _follow(chained, stream, nxt)


def chain(first, then, name, stream=None):
    """A ChainedHandle for first (a registered handle) followed by then(first's result), which
    enqueues the second collective and returns its registered handle, or a More when a third
    follows the second (and so on). stream: the caller's current CUDA stream, which the threads
    work on (None on the CPU)."""
    chained = ChainedHandle(name)
    with _start_lock:
        if not _worker:
            t = threading.Thread(target=_run, name="hvdsparse-chained", daemon=True)
            t.start()
            _worker.append(t)
    _pending.put((first, then, chained, stream))
    return chained
