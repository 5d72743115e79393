"""The compute service of Horovod's tf.data integration (hvdsparse.tensorflow.data): a small
service on one rank of the compute job where tf.data dispatchers register their addresses and
workers register with their dispatcher, and where the training side waits for both; its
shutdown ends the workers. Requests and replies are JSON over channel.py's signed wire, under
the key that the compute job's config file carries."""
import json
import os
import socket
import threading

from hvdsparse.runner.channel import SignedServer, Unreachable, call

_CONNECT_SECONDS = 30.0  # beyond what a request may wait for on the service


class ComputeService:
    """Serves on every interface; addresses() says where (written into the config file)."""

    def __init__(self, dispatchers, workers_per_dispatcher, key, nics=None):
        if dispatchers < 1 or workers_per_dispatcher < 1:
            raise ValueError("a compute service needs at least one dispatcher and one worker per "
                             "dispatcher, got %d and %d" % (dispatchers, workers_per_dispatcher))
        self._dispatchers = dispatchers
        self._workers_per_dispatcher = workers_per_dispatcher
        self._addresses = {}  # dispatcher id -> its tf.data address
        self._workers = {}  # dispatcher id -> the worker ids registered with it
        self._stopping = False
        self._changed = threading.Condition()
        self._server = SignedServer(key, "", self._answer, "hvdsparse compute service")

    def addresses(self):
        """{interface: [(address, port)]}, as Horovod's services list theirs."""
        return {"hvdsparse": [(host, self._server.port) for host in _local_addresses()]}

    def shutdown(self):
        """Releases every worker waiting for shutdown, then stops serving."""
        self._do_shutdown()
        self._server.close()

    def _answer(self, body):
        request = json.loads(body.decode())
        handler = getattr(self, "_do_" + request.get("op", ""), None)
        if handler is None:
            return json.dumps({"error": "unknown request %r" % request.get("op")}).encode()
        try:
            return json.dumps({"ok": handler(**request.get("args", {}))}).encode()
        except (ValueError, TimeoutError) as e:
            return json.dumps({"error": str(e)}).encode()

    def _check_dispatcher(self, dispatcher_id):
        if not 0 <= dispatcher_id < self._dispatchers:
            raise ValueError("dispatcher id %d is not one of the %d dispatchers"
                             % (dispatcher_id, self._dispatchers))

    def _wait(self, ready, timeout, what):
        with self._changed:
            if not self._changed.wait_for(lambda: ready() or self._stopping, timeout):
                raise TimeoutError("%s within %s s" % (what, timeout))
            if not ready():
                raise ValueError("the compute service shut down before %s"
                                 % what.replace("did not", "could"))

    def _do_register_dispatcher(self, dispatcher_id, address):
        self._check_dispatcher(dispatcher_id)
        with self._changed:
            self._addresses[dispatcher_id] = address
            self._changed.notify_all()

    def _do_wait_for_dispatcher(self, dispatcher_id, timeout):
        self._check_dispatcher(dispatcher_id)
        self._wait(lambda: dispatcher_id in self._addresses, timeout,
                   "dispatcher %d did not register" % dispatcher_id)
        return self._addresses[dispatcher_id]

    def _do_register_worker(self, dispatcher_id, worker_id):
        self._check_dispatcher(dispatcher_id)
        with self._changed:
            self._workers.setdefault(dispatcher_id, set()).add(worker_id)
            self._changed.notify_all()

    def _do_wait_for_workers(self, dispatcher_id, timeout):
        self._check_dispatcher(dispatcher_id)
        count = self._workers_per_dispatcher
        self._wait(lambda: len(self._workers.get(dispatcher_id, ())) >= count, timeout,
                   "the %d worker(s) of dispatcher %d did not all register"
                   % (count, dispatcher_id))

    def _do_shutdown(self):
        with self._changed:
            self._stopping = True
            self._changed.notify_all()

    def _do_wait_for_shutdown(self):
        with self._changed:
            self._changed.wait_for(lambda: self._stopping)


class ComputeClient:
    """Calls a ComputeService at the first of its addresses that answers."""

    def __init__(self, compute_addresses, key, verbose=1):
        self._candidates = [tuple(a) for addrs in compute_addresses.values() for a in addrs]
        if not self._candidates:
            raise ValueError("the compute service config lists no address")
        self._key = key
        self._address = None

    def register_dispatcher(self, dispatcher_id, dispatcher_address):
        self._call("register_dispatcher", dispatcher_id=dispatcher_id,
                   address=dispatcher_address)

    def wait_for_dispatcher_registration(self, dispatcher_id, timeout):
        return self._call("wait_for_dispatcher", timeout, dispatcher_id=dispatcher_id,
                          timeout=timeout)

    def register_worker_for_dispatcher(self, dispatcher_id, worker_id):
        self._call("register_worker", dispatcher_id=dispatcher_id, worker_id=worker_id)

    def wait_for_dispatcher_worker_registration(self, dispatcher_id, timeout):
        self._call("wait_for_workers", timeout, dispatcher_id=dispatcher_id, timeout=timeout)

    def shutdown(self):
        self._call("shutdown")

    def wait_for_shutdown(self):
        self._call("wait_for_shutdown", None)

    def _call(self, op, waits=0.0, **args):
        """waits: how long the service may hold the request (None: as long as it takes)."""
        body = json.dumps({"op": op, "args": args}).encode()
        timeout = None if waits is None else _CONNECT_SECONDS + waits
        unreachable = []
        for address in [self._address] if self._address else self._candidates:
            try:
                reply = json.loads(call(address, self._key, body, timeout,
                                        "the compute service").decode())
                self._address = address
                break
            except Unreachable as e:
                unreachable.append(str(e))
        else:
            raise Unreachable("; ".join(unreachable))
        if "error" in reply:
            raise RuntimeError("compute service: %s: %s" % (op, reply["error"]))
        return reply["ok"]


def _local_addresses():
    """This host's addresses, the one that reaches the job's rendezvous host first."""
    found = []
    store = os.environ.get("HOROVOD_GLOO_RENDEZVOUS_ADDR")
    if store:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
                probe.connect((store, 9))  # no packet is sent: this picks the route
                found.append(probe.getsockname()[0])
        except OSError:
            pass
    try:
        found += [info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None,
                                                             socket.AF_INET)]
    except OSError:
        pass
    found.append("127.0.0.1")
    return list(dict.fromkeys(found))
