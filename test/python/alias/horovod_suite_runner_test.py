"""test/horovod_suite/run_parallel_tests.py against a stand-in for Horovod's test tree: each
test's outcome (passed, skipped, failed, a hang past the job's limit with every rank of that job
ended), horovod.runner.util.threads.in_thread from the alias, and --leave-out-optimizer.

Usage: horovod_suite_runner_test.py ROOT LAUNCHER (the source tree, build/bin/hvdsparse)."""
import json
import os
import subprocess
import sys
import tempfile
import time

COMMON = '''import os
from horovod.runner.util.threads import in_thread
'''

TESTS = '''import os
import sys
import threading
import time
import unittest

import torch

sys.path.append(os.path.join(os.path.dirname(__file__), os.pardir, 'utils'))
from common import in_thread  # noqa: E402

import horovod.torch as hvd  # noqa: E402


class Muon(torch.optim.Optimizer):
    """Stands for an optimizer that a newer torch adds and the sweep cannot build."""


class TorchTests(unittest.TestCase):
    def test_passes(self):
        hvd.init()
        self.assertEqual(hvd.allreduce(torch.ones(4), op=hvd.Sum).tolist(), [hvd.size()] * 4)

    def test_thread_helper(self):
        done = threading.Event()
        in_thread(done.set).join()
        self.assertTrue(done.is_set())

    def test_skips(self):
        self.skipTest("not here")

    def test_fails(self):
        hvd.init()
        self.assertEqual(hvd.rank(), -1)

    def test_hangs(self):
        hvd.init()
        with open(os.path.join(os.environ["PID_DIR"], str(os.getpid())), "w"):
            pass
        time.sleep(600)

    def test_sweep(self):
        optimizers = [
            subclass.__name__
            for subclass in torch.optim.Optimizer.__subclasses__()
            if subclass != torch.optim.LBFGS and
               subclass != torch.optim.SparseAdam
        ]
        self.assertNotIn("Muon", optimizers)
'''


def run(root, launcher, horovod, extra, json_out):
    cmd = [sys.executable, os.path.join(root, "test", "horovod_suite", "run_parallel_tests.py"),
           "--horovod-src", horovod, "--file", "test_torch.py", "--np", "2",
           "--launcher", launcher, "--timeout", "25", "--json", json_out] + extra
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    sys.stdout.write(proc.stdout + proc.stderr)
    with open(json_out) as f:
        return proc.returncode, {r["test"].split("::")[-1]: r["outcome"]
                                 for r in json.load(f)["results"]}


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def main():
    root, launcher = sys.argv[1], os.path.abspath(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        horovod = os.path.join(tmp, "horovod")
        for folder, name, text in (("utils", "common.py", COMMON),
                                   ("parallel", "test_torch.py", TESTS)):
            os.makedirs(os.path.join(horovod, "test", folder), exist_ok=True)
            with open(os.path.join(horovod, "test", folder, name), "w") as f:
                f.write(text)
        os.environ["PID_DIR"] = os.path.join(tmp, "pids")
        os.makedirs(os.environ["PID_DIR"])

        rc, outcomes = run(root, launcher, horovod, ["--leave-out-optimizer", "Muon"],
                           os.path.join(tmp, "all.json"))
        want = {"test_passes": "passed", "test_thread_helper": "passed",
                "test_skips": "skipped", "test_fails": "failed", "test_hangs": "hang",
                "test_sweep": "passed"}
        assert outcomes == want, outcomes
        assert rc == 1, "a failed test and a hang must fail the run, got exit %d" % rc
        # The hung job's ranks were ended with it (each wrote its pid before sleeping).
        pids = [int(p) for p in os.listdir(os.environ["PID_DIR"])]
        assert len(pids) == 2, pids
        deadline = time.time() + 10
        while any(alive(p) for p in pids) and time.time() < deadline:
            time.sleep(0.2)
        assert not any(alive(p) for p in pids), "ranks of the hung job still run: %s" % pids

        # Without the option the sweep meets Muon.
        rc, outcomes = run(root, launcher, horovod, ["-k", "test_sweep"],
                           os.path.join(tmp, "sweep.json"))
        assert outcomes == {"test_sweep": "failed"} and rc == 1, (rc, outcomes)
    print("horovod_suite_runner_test: passed")


if __name__ == "__main__":
    main()
