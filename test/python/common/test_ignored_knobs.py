"""Horovod knobs that hvdsparse does not act on are named in one warning line each at init."""
import os
import subprocess
import sys

INIT_ALONE = "from hvdsparse.common import basics; basics.init(); basics.shutdown()"


def test_init_warns_once_for_each_ignored_horovod_knob():
    # Each rank starts a one-process job of its own: none of this job's launch settings.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HOROVOD_", "HVDSPARSE_")) or k == "HVDSPARSE_LIBRARY"}
    env.update(HOROVOD_TORUS_ALLREDUCE="1", HOROVOD_HIERARCHICAL_ALLGATHER="1",
               HOROVOD_THREAD_AFFINITY="0", HOROVOD_NUM_NCCL_STREAMS="2",
               HOROVOD_CONTROLLER="gloo")  # what hvdsparse does anyway: no warning
    run = subprocess.run([sys.executable, "-c", INIT_ALONE], env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    warned = [line for line in run.stderr.splitlines() if "has no effect in hvdsparse" in line]
    for knob in ("HOROVOD_TORUS_ALLREDUCE=1", "HOROVOD_HIERARCHICAL_ALLGATHER=1",
                 "HOROVOD_THREAD_AFFINITY=0", "HOROVOD_NUM_NCCL_STREAMS=2"):
        assert sum(knob in line for line in warned) == 1, run.stderr
    assert len(warned) == 4, run.stderr
