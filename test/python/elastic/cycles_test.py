"""Many elastic init/shutdown cycles in one process, the job's size changing every cycle (2, 3,
2, ...): this process plays the launcher's part (it publishes each membership, through a store
served by a helper process, as the launcher serves it outside the workers) and rank 0;
short-lived helper processes are the other ranks. Each cycle runs a barrier at the new
size. After a warm-up the process's threads, open file descriptors, shared-memory segments (its
own and its helpers', in /dev/shm and mapped) must not change, and its resident memory must not
keep growing.

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


# Serves the store; sets each "key value" line read from stdin, then says "ok".
STORE = r"""
import ctypes, sys
from hvdsparse.common import _lib
lib = _lib.lib()
server, port = ctypes.c_void_p(), ctypes.c_int()
start = lib.hvds__store_server_start
start.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                  ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int)]
assert start(b"127.0.0.1", 0, sys.argv[1].encode(), ctypes.byref(server), ctypes.byref(port)) == 0
put = lib.hvds__store_server_set
put.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
print(port.value, flush=True)
for line in sys.stdin:
    key, val = line.split()
    put(server, key.encode(), val.encode(), len(val))
    print("ok", flush=True)
"""


def shm_entries(pids):
    """/dev/shm segments made by these processes (ops/shm names them hvds-<pid>-<nonce>)."""
    return sum(1 for name in os.listdir("/dev/shm")
               if name.startswith("hvds-") and name.split("-")[1] in pids)


def shm_mapped():
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if "/dev/shm/hvds-" in line)


def counts(pids):
    return (len(os.listdir("/proc/self/task")), len(os.listdir("/proc/self/fd")),
            shm_entries(pids), shm_mapped())


def rss_kib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def main():
    lib = _lib.lib()
    store = subprocess.Popen([sys.executable, "-c", STORE, SECRET], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    port = int(store.stdout.readline())

    def publish(key, val):
        store.stdin.write("%s %s\n" % (key, val))
        store.stdin.flush()
        assert store.stdout.readline() == "ok\n"

    env = {"HVDSPARSE_ELASTIC": "1", "HVDSPARSE_JOB_ID": JOB, "HVDSPARSE_SECRET": SECRET,
           "HVDSPARSE_GLOO_RENDEZVOUS_ADDR": "127.0.0.1",
           "HVDSPARSE_GLOO_RENDEZVOUS_PORT": str(port), "HVDSPARSE_HOSTNAME": "h",
           "HVDSPARSE_START_TIMEOUT": "30", "HVDSPARSE_ELASTIC_TIMEOUT": "30"}
    os.environ.update(env, HVDSPARSE_LOCAL_RANK="0")
    seen, rss, in_use, pids = [], [], [], {str(os.getpid())}
    began = time.time()
    for cycle in range(CYCLES):
        size, epoch = 2 + cycle % 2, cycle + 1
        for r in range(size):  # the worker h:<r> is rank r, all on host h
            line = "%d,%d,%d,%d,0,1" % (r, size, r, size)
            key = "hvds/%s/elastic/e%d/h:%d" % (JOB, epoch, r)
            publish(key, line)
        publish("hvds/%s/elastic/epoch" % JOB, epoch)
        helpers = [subprocess.Popen([sys.executable, "-c", HELPER, str(size)],
                                    env=dict(os.environ, HVDSPARSE_LOCAL_RANK=str(r)))
                   for r in range(1, size)]
        pids.update(str(p.pid) for p in helpers)
        assert lib.hvds_init() == 0, lib.last_error() if hasattr(lib, "last_error") else ""
        assert (lib.hvds_rank(), lib.hvds_size()) == (0, size)
        h = ctypes.c_int64()
        assert lib.hvds_barrier_async(0, ctypes.byref(h)) == 0
        assert lib.hvds_wait(h.value, 30000) == 0
        lib.hvds_release(h.value)
        in_use.append(shm_mapped())  # the ranks share a host: its segments are mapped now
        lib.hvds_shutdown()
        for p in helpers:
            assert p.wait(timeout=60) == 0, "a helper rank failed in cycle %d" % cycle
        seen.append(counts(pids))
        rss.append(rss_kib())
        if cycle < 5 or cycle % 50 == 0 or cycle == CYCLES - 1:
            print("cycle %d size %d: threads %d fds %d shm segments %d mapped %d rss %d KiB" %
                  ((cycle, size) + seen[-1] + (rss[-1],)), flush=True)
    store.stdin.close()
    store.wait(timeout=30)
    settled = seen[2:]
    if len(set(settled)) != 1:
        sys.exit("FAIL: threads, fds or shared memory changed across cycles: %s" % seen)
    if min(in_use) == 0:
        sys.exit("FAIL: no shared-memory segment was mapped during a cycle: %s" % in_use)
    if seen[-1][2:] != (0, 0):
        sys.exit("FAIL: shared-memory segments left after shutdown: %s" % (seen[-1],))
    grown = rss[-1] - rss[2]
    if grown > 4096:
        sys.exit("FAIL: resident memory grew %d KiB from cycle 2 to cycle %d" % (grown, CYCLES - 1))
    print("cycles: %d init/shutdown cycles in %.1f s, (threads, fds, shm segments, mapped) flat "
          "at %s, resident memory %+d KiB from cycle 2" % (CYCLES, time.time() - began, settled[0],
                                                          grown))


if __name__ == "__main__":
    main()
