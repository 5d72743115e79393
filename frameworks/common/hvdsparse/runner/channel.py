"""Signed request and reply over TCP, under a job's secret: the wire between run()'s driver and
its workers (a worker fetches the function, and later sends its rank's result or error), and
the tf.data compute service's (compute_service.py). A connection carries one request and one
reply. The server opens it with a fresh nonce; both messages are signed with HMAC-SHA256 over
that nonce under the secret, and neither side unpickles a message that fails the check."""
import hashlib
import hmac
import os
import socket
import socketserver
import struct
import sys
import threading

NONCE_BYTES = 16
MAC_BYTES = 32
MAX_BODY = 1 << 31  # a result bigger than this should travel another way
FETCH, RESULT, ERROR = b"F", b"R", b"E"
_HEADER = struct.Struct(">cii")  # kind, rank, size
_LENGTH = struct.Struct(">Q")


class ChannelError(RuntimeError):
    """A message was refused (wrong secret, cut short) or the peer could not be reached."""


class Unreachable(ChannelError):
    """No connection could be made to the peer's address."""


def _mac(secret, nonce, direction, body):
    return hmac.new(secret, nonce + direction + body, hashlib.sha256).digest()


def _read_exact(sock, count):
    chunks, left = [], count
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ChannelError("the connection closed %d bytes short" % left)
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _send(sock, secret, nonce, direction, body):
    sock.sendall(_LENGTH.pack(len(body)) + body + _mac(secret, nonce, direction, body))


def _receive(sock, secret, nonce, direction):
    (length,) = _LENGTH.unpack(_read_exact(sock, _LENGTH.size))
    if length > MAX_BODY:
        raise ChannelError("a message of %d bytes is over the limit" % length)
    body = _read_exact(sock, length)
    if not hmac.compare_digest(_read_exact(sock, MAC_BYTES), _mac(secret, nonce, direction, body)):
        raise ChannelError("a message failed the job's secret")
    return body


def call(address, secret, body, timeout=60.0, peer="the driver"):
    """Sends one signed request to a SignedServer at address (host, port); returns its verified
    reply. timeout None waits as long as the server takes to answer."""
    try:
        sock = socket.create_connection(address, timeout=60.0 if timeout is None else timeout)
        sock.settimeout(timeout)
    except OSError as e:
        raise Unreachable("cannot reach %s at %s:%d: %s" % (peer, address[0], address[1], e))
    try:
        with sock:
            nonce = _read_exact(sock, NONCE_BYTES)
            _send(sock, secret, nonce, b"q", body)
            return _receive(sock, secret, nonce, b"r")
    except OSError as e:
        raise ChannelError("lost %s at %s:%d: %s" % (peer, address[0], address[1], e))


def request(address, secret, kind, rank, size, payload=b"", timeout=60.0):
    """A worker's request to run()'s driver; returns its verified reply."""
    return call(address, secret, _HEADER.pack(kind, rank, size) + payload, timeout)


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


class SignedServer:
    """Answers signed requests on its own thread, one thread per connection: the reply to a
    verified request body is answer(body). A request that fails the check gets no reply and is
    reported on stderr under `name`."""

    def __init__(self, secret, bind_host, answer, name):
        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                nonce = os.urandom(NONCE_BYTES)
                self.request.settimeout(60.0)
                try:
                    self.request.sendall(nonce)
                    reply = answer(_receive(self.request, secret, nonce, b"q"))
                    _send(self.request, secret, nonce, b"r", reply)
                except (ChannelError, OSError, struct.error) as e:
                    sys.stderr.write("%s: refused a connection from %s: %s\n"
                                     % (name, self.client_address[0], e))

        self._server = _Server((bind_host, 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name=name)
        self._thread.start()

    def close(self):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


class DriverServer(SignedServer):
    """run()'s driver: serves the pickled function and collects what each rank sends back.
    reports: (kind, rank, size, payload) in order of arrival."""

    def __init__(self, function_bytes, secret, bind_host):
        self.reports = []
        lock = threading.Lock()

        def handle(body):
            kind, rank, size = _HEADER.unpack_from(body)
            if kind == FETCH:
                return function_bytes
            with lock:
                self.reports.append((kind, rank, size, body[_HEADER.size:]))
            return b"ok"

        super().__init__(secret, bind_host, handle, "hvdsparse.run()")
