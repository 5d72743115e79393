#!/usr/bin/env python3
"""An iperf-like TCP stream test between two namespace hosts: one stream, the receiver counts.

  linkrate.py recv PORT       listens, prints "ready", then after the sender closes prints the
                              goodput in bit/s over the stream minus its first WARMUP seconds
  linkrate.py send ADDR PORT SECONDS
measure(cluster, src, dst) runs both with ip netns exec and returns the receiver's bit/s."""
import socket
import subprocess
import sys
import time

WARMUP = 0.5  # s: slow start and the token bucket's initial burst
CHUNK = 1 << 20


def recv(port):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    print("ready", flush=True)
    conn, _ = srv.accept()
    buf = bytearray(CHUNK)
    total, t_first, mark = 0, None, None
    while True:
        n = conn.recv_into(buf)
        now = time.monotonic()
        if n == 0:
            break
        if t_first is None:
            t_first = now
        total += n
        if mark is None and now - t_first >= WARMUP:
            mark = (now, total)
    if mark is None or now <= mark[0]:
        print("0")
        return
    print(f"{(total - mark[1]) * 8 / (now - mark[0]):.0f}", flush=True)


def send(addr, port, seconds):
    s = socket.create_connection((addr, port))
    buf = b"\0" * CHUNK
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        s.sendall(buf)
    s.close()


def measure(cluster, src, dst, seconds=3.0, port=5201):
    """Goodput in bit/s of one TCP stream from host src to host dst."""
    me = [sys.executable, __file__]
    rx = subprocess.Popen(cluster.netns(dst, me + ["recv", str(port)]), stdout=subprocess.PIPE,
                          text=True)
    try:
        if rx.stdout.readline().strip() != "ready":
            raise RuntimeError("linkrate receiver did not start")
        subprocess.run(cluster.netns(src, me + ["send", cluster.addrs[dst], str(port),
                                                str(seconds)]), check=True, timeout=seconds + 30)
        out, _ = rx.communicate(timeout=30)
        return float(out.strip().splitlines()[-1])
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()


if __name__ == "__main__":
    if sys.argv[1] == "recv":
        recv(int(sys.argv[2]))
    elif sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit(__doc__)
