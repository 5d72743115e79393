"""Elastic training shared by the framework bindings: Horovod's State, ObjectState and the retry
loop behind hvd.elastic.run.

A job started with `hvdsparse run --min-np` or `--host-discovery-script` survives the loss of
workers and takes in new ones. The launcher publishes each new membership in its store; a worker
joins it at its next init (shutdown, then init, with the rank and size the launcher assigned).
The training function sees two interruptions:

- HorovodInternalError: a collective failed (a peer died). Every survivor rolls back to the last
  commit(), re-initialises and syncs from the new rank 0 before retrying.
- HostsUpdatedInterrupt: commit() found that the launcher published a newer membership (workers
  added or removed). The state is kept; the workers re-initialise and sync, so that new ones
  receive it; a removed worker ends.
"""
import functools
import sys

from hvdsparse.common import _lib, basics
from hvdsparse.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt


# A reset whose rendezvous fails (the membership changed again while it ran) is retried: the next
# init waits for the launcher's newer membership.
_RESET_TRIES = 5


def hosts_updated():
    """True when the launcher published a membership newer than this rank's (ask on one rank)."""
    if not _lib.has("hvds_elastic_hosts_updated"):
        return False
    return _lib.lib().hvds_elastic_hosts_updated() == 1


class _HostMessages:
    """Horovod's State._host_messages: a queue that Horovod's driver fills with host changes and
    that scripts (Horovod's own elastic tests among them) poll to wait for one. Here empty()
    asks the launcher whether it published a newer membership."""

    def empty(self):
        return not hosts_updated()


class State:
    """State of a training job that elastic.run keeps across resets. Subclasses say how to save,
    restore and sync it; commit() saves it and checks for new hosts, so call it every few batches
    (a failure rolls back to the last commit, and added workers join at the next one)."""

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks = []
        self._host_messages = _HostMessages()
        self._last_updated_timestamp = 0  # Horovod's; scripts reset it, nothing reads it here

    def register_reset_callbacks(self, callbacks):
        """Functions called with no argument after every reset (e.g. to scale the learning rate
        to the new size)."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state in memory, then raises HostsUpdatedInterrupt on every rank when the
        launcher added or removed workers."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every rank together when rank 0 learns that the
        membership changed; a collective, so every rank must call it."""
        updated = hosts_updated() if self._rank() == 0 else False
        if self._bcast_object(updated):
            raise HostsUpdatedInterrupt(False)

    def save(self):
        raise NotImplementedError()

    def restore(self):
        raise NotImplementedError()

    def sync(self):
        raise NotImplementedError()

    def reset(self):
        pass


class ObjectState(State):
    """State made of plain Python objects given as keyword arguments, read and written as
    attributes (state.epoch += 1); sync() broadcasts them from rank 0."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {attr: getattr(self, attr) for attr in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for attr, value in self._saved_state.items():
            setattr(self, attr, value)


class HandlerState(ObjectState):
    """An ObjectState that also keeps framework objects (a model, an optimizer, variables), each
    through a handler with save(), restore(), sync() and reset(); the handlers act before the
    plain values. The bindings' states (TorchState, TensorFlowKerasState...) are made of these."""

    def __init__(self, handlers, bcast_object, get_rank, **kwargs):
        self._handlers = list(handlers)
        super().__init__(bcast_object=bcast_object, get_rank=get_rank, **kwargs)

    def save(self):
        for handler in self._handlers:
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers:
            handler.restore()
        super().restore()

    def sync(self):
        for handler in self._handlers:
            handler.sync()
        super().sync()

    def reset(self):
        for handler in self._handlers:
            handler.reset()
        super().reset()


def run_fn(func, reset):
    """Wraps func(state, ...) in elastic.run's retry loop; reset() re-initialises the runtime.
    No collective may run before the wrapped function: the first thing it does is sync."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        skip_sync = False
        while True:
            try:
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HorovodInternalError:
                state.restore()
                skip_sync = False
            except HostsUpdatedInterrupt as e:
                skip_sync = e.skip_sync
            _reset_retrying(reset)
            state.on_reset()

    return wrapper


def _reset_retrying(reset):
    """reset(), retried; a worker the launcher took out of the job (its host left the discovery
    script's list) ends here, with exit status 0."""
    for attempt in range(_RESET_TRIES):
        try:
            return reset()
        except HorovodInternalError:
            if attempt + 1 == _RESET_TRIES:
                raise
        except ValueError as e:
            if "has been removed from elastic job" not in str(e):
                raise
            sys.stderr.write("hvdsparse: %s; this worker ends\n" % e)
            sys.stderr.flush()
            raise SystemExit(0)


def reset_runtime():
    """Shutdown then init: the runtime joins the launcher's newest membership."""
    basics.shutdown()
    basics.init()
