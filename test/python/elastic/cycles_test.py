"""Many elastic init/shutdown cycles in one process, the job's size changing every cycle (2, 3,
2, ...): this process plays the launcher (it serves the store and publishes each membership) and
rank 0; short-lived helper processes are the other ranks. Each cycle runs a barrier at the new
size. After a warm-up the process's threads and open file descriptors must not change, and its
resident memory must not keep growing.

    python3 cycles_test.py [cycles]
"""
import ctypes
import os
import subprocess
import sys
import time

from hvdsparse.common import _lib

CYCLES = int(sys.argv[1]) if len(sys.argv) > 1 else 20
JOB = "cycles%d" % os.getpid()
SECRET = "s3cret"
HELPER = r"""
import sys
from hvdsparse.common import _lib
lib = _lib.lib()
assert lib.hvds_init() == 0, lib.hvds_last_error()
h = _lib.ctypes.c_int64()
assert lib.hvds_barrier_async(0, _lib.ctypes.byref(h)) == 0
assert lib.hvds_wait(h.value, 30000) == 0, lib.hvds_last_error()
lib.hvds_release(h.value)
assert lib.hvds_size() == int(sys.argv[1]), (lib.hvds_size(), sys.argv[1])
lib.hvds_shutdown()
"""


def counts():
    return len(os.listdir("/proc/self/task")), len(os.listdir("/proc/self/fd"))


def rss_kib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def main():
    lib = _lib.lib()
    server = ctypes.c_void_p()
    port = ctypes.c_int()
    start = lib.hvds__store_server_start
    start.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                      ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int)]
    publish = lib.hvds__store_server_set
    publish.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    assert start(b"127.0.0.1", 0, SECRET.encode(), ctypes.byref(server), ctypes.byref(port)) == 0
    env = {"HVDSPARSE_ELASTIC": "1", "HVDSPARSE_JOB_ID": JOB, "HVDSPARSE_SECRET": SECRET,
           "HVDSPARSE_GLOO_RENDEZVOUS_ADDR": "127.0.0.1",
           "HVDSPARSE_GLOO_RENDEZVOUS_PORT": str(port.value), "HVDSPARSE_HOSTNAME": "h",
           "HVDSPARSE_START_TIMEOUT": "30", "HVDSPARSE_ELASTIC_TIMEOUT": "30"}
    os.environ.update(env, HVDSPARSE_LOCAL_RANK="0")
    seen, rss = [], []
    began = time.time()
    for cycle in range(CYCLES):
        size, epoch = 2 + cycle % 2, cycle + 1
        for r in range(size):  # the worker h:<r> is rank r, all on host h
            line = "%d,%d,%d,%d,0,1" % (r, size, r, size)
            key = "hvds/%s/elastic/e%d/h:%d" % (JOB, epoch, r)
            publish(server, key.encode(), line.encode(), len(line))
        publish(server, ("hvds/%s/elastic/epoch" % JOB).encode(), str(epoch).encode(),
                len(str(epoch)))
        helpers = [subprocess.Popen([sys.executable, "-c", HELPER, str(size)],
                                    env=dict(os.environ, HVDSPARSE_LOCAL_RANK=str(r)))
                   for r in range(1, size)]
        assert lib.hvds_init() == 0, lib.last_error() if hasattr(lib, "last_error") else ""
        assert (lib.hvds_rank(), lib.hvds_size()) == (0, size)
        h = ctypes.c_int64()
        assert lib.hvds_barrier_async(0, ctypes.byref(h)) == 0
        assert lib.hvds_wait(h.value, 30000) == 0
        lib.hvds_release(h.value)
        lib.hvds_shutdown()
        for p in helpers:
            assert p.wait(timeout=60) == 0, "a helper rank failed in cycle %d" % cycle
        seen.append(counts())
        rss.append(rss_kib())
        print("cycle %d size %d: threads %d fds %d rss %d KiB" % ((cycle, size) + seen[-1] +
                                                                 (rss[-1],)), flush=True)
    lib.hvds__store_server_stop.argtypes = [ctypes.c_void_p]
    lib.hvds__store_server_stop(server)
    settled = seen[2:]
    if len(set(settled)) != 1:
        sys.exit("FAIL: threads and fds changed across cycles: %s" % seen)
    grown = rss[-1] - rss[2]
    if grown > 4096:
        sys.exit("FAIL: resident memory grew %d KiB from cycle 2 to cycle %d" % (grown, CYCLES - 1))
    print("cycles: %d init/shutdown cycles in %.1f s, threads and fds flat at %s, resident memory "
          "%+d KiB from cycle 2" % (CYCLES, time.time() - began, settled[0], grown))


if __name__ == "__main__":
    main()
