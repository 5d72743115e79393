"""Exceptions raised by every framework binding, named as Horovod's."""


class HorovodInternalError(RuntimeError):
    """A collective failed on some rank: ranks disagreed, a peer died, or the runtime stopped."""


class HostsUpdatedInterrupt(RuntimeError):
    """The set of hosts changed (elastic training). hvdsparse does not raise it yet."""

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync
