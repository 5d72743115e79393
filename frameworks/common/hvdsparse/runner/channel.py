"""The wire between run()'s driver and its workers: a worker fetches the function, and later
sends its rank's result or error. A connection carries one request and one reply. The driver
opens it with a fresh nonce; both messages are signed with HMAC-SHA256 over that nonce under the
job's secret, and neither side unpickles a message that fails the check."""
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


def request(address, secret, kind, rank, size, payload=b"", timeout=60.0):
    """Sends one request to the driver at address (host, port); returns its verified reply."""
    try:
        with socket.create_connection(address, timeout=timeout) as sock:
            nonce = _read_exact(sock, NONCE_BYTES)
            _send(sock, secret, nonce, b"q", _HEADER.pack(kind, rank, size) + payload)
            return _receive(sock, secret, nonce, b"r")
    except OSError as e:
        raise ChannelError("cannot reach the driver at %s:%d: %s" % (address[0], address[1], e))


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


class DriverServer:
    """Serves the pickled function and collects what each rank sends back, on its own thread.
    reports: (kind, rank, size, payload) in order of arrival."""

    def __init__(self, function_bytes, secret, bind_host):
        self.reports = []
        lock = threading.Lock()
        reports = self.reports

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                nonce = os.urandom(NONCE_BYTES)
                self.request.settimeout(60.0)
                try:
                    self.request.sendall(nonce)
                    body = _receive(self.request, secret, nonce, b"q")
                    kind, rank, size = _HEADER.unpack_from(body)
                    if kind == FETCH:
                        _send(self.request, secret, nonce, b"r", function_bytes)
                        return
                    with lock:
                        reports.append((kind, rank, size, body[_HEADER.size:]))
                    _send(self.request, secret, nonce, b"r", b"ok")
                except (ChannelError, OSError, struct.error) as e:
                    sys.stderr.write("hvdsparse.run(): refused a connection from %s: %s\n"
                                     % (self.client_address[0], e))

        self._server = _Server((bind_host, 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="hvdsparse-run-driver")
        self._thread.start()

    def close(self):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
