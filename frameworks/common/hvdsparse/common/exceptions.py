"""Exceptions raised by every framework binding, named as Horovod's."""


class HorovodInternalError(RuntimeError):
    """A collective failed on some rank: ranks disagreed, a peer died, or the runtime stopped."""


class HostsUpdatedInterrupt(RuntimeError):
    """The launcher added or removed workers (elastic training): commit() raises it on every rank
    together, and hvd.elastic.run re-initialises with the new membership. skip_sync: the
    state need not be broadcast again."""

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync
