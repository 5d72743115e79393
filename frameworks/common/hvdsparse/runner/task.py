"""One worker of hvdsparse.run(): fetches the function from the driver, runs it, and sends back
its return value, or the traceback when it raises. Started by the launcher as
`python -m hvdsparse.runner.task`, with the driver's port and secret in the environment
(HVDSPARSE_RUN_FUNC_PORT, HVDSPARSE_RUN_FUNC_SECRET) and the driver's host in the launcher's
rendezvous address, which every worker can reach."""
import os
import sys
import traceback

import cloudpickle

from hvdsparse.runner import channel


def _env(*names, default=None):
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return default


def _launch_identity():
    rank = int(_env("HVDSPARSE_RANK", "HOROVOD_RANK", default="0"))
    size = int(_env("HVDSPARSE_SIZE", "HOROVOD_SIZE", default="1"))
    return rank, size


def _final_identity(rank, size):
    """The rank and size when the function returned: the runtime's, when the function left it
    initialized (an elastic job may have renumbered its ranks), else the launcher's."""
    basics = sys.modules.get("hvdsparse.common.basics")
    if basics is not None and basics.is_initialized():
        return basics.rank(), basics.size()
    return rank, size


def _report(address, secret, kind, rank, size, payload):
    rank, size = _final_identity(rank, size)
    try:
        channel.request(address, secret, kind, rank, size, payload)
        return True
    except channel.ChannelError as e:
        sys.stderr.write("hvdsparse.run() worker, rank %d: cannot send its result: %s\n"
                         % (rank, e))
        return False


def main():
    secret = bytes.fromhex(os.environ.pop("HVDSPARSE_RUN_FUNC_SECRET", ""))
    address = (_env("HVDSPARSE_RUN_FUNC_ADDR", "HVDSPARSE_GLOO_RENDEZVOUS_ADDR",
                    "HOROVOD_GLOO_RENDEZVOUS_ADDR", default="127.0.0.1"),
               int(_env("HVDSPARSE_RUN_FUNC_PORT", default="0")))
    rank, size = _launch_identity()
    if not secret or not address[1]:
        sys.stderr.write("hvdsparse.run() worker, rank %d: HVDSPARSE_RUN_FUNC_PORT and "
                         "HVDSPARSE_RUN_FUNC_SECRET are not set; only run() starts this\n" % rank)
        return 2
    try:
        func = cloudpickle.loads(channel.request(address, secret, channel.FETCH, rank, size))
    except channel.ChannelError as e:
        sys.stderr.write("hvdsparse.run() worker, rank %d: cannot fetch the function: %s\n"
                         % (rank, e))
        return 1
    try:
        payload = cloudpickle.dumps(func())
    except BaseException:
        _report(address, secret, channel.ERROR, rank, size, traceback.format_exc().encode())
        raise  # uncaught, so the runtime tells the peers which rank stopped and why
    return 0 if _report(address, secret, channel.RESULT, rank, size, payload) else 1


if __name__ == "__main__":
    sys.exit(main())
