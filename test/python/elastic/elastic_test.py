"""Elastic jobs end to end: python3 elastic_test.py <hvdsparse binary> <scenario>. Given the
horovodrun binary instead, kill runs a Horovod script (import horovod.torch) under it.

  kill      np 3, --min-np 2, rank 2 alone on a second host name: it SIGKILLs itself
            mid-training; the two others roll back to the last commit, go on at size 2 and
            finish every step with equal parameters.
  kill_rank0  the same with rank 0, the one whose state sync() sends, killed: rank 1 becomes
            rank 0 and its last commit is the job's.
  host_ban  np 4, --min-np 2, two hosts of two slots: rank 3 dies, and as in Horovod its whole
            host leaves the job (rank 2 ends with exit status 0); the two others finish at
            size 2.
  kill_in_recovery  np 4, --min-np 2, --blacklist-scope slot: rank 3 dies, then rank 2 dies
            while the two others wait for it in the new membership's rendezvous; they give that
            one up as soon as the launcher publishes the next and finish at size 2.
  grow      np 2, --max-np 3: the discovery script lists a third slot mid-run; the workers are
            interrupted at their next commit, the new one receives the state by sync() and the
            job ends at size 3.
  finish_while_growing  np 2, --max-np 3: the discovery script lists a third slot while the two
            workers never commit again; they finish, the new worker waits for a membership that
            can no longer form, and the launcher ends it: the job exits 0.
  shrink    np 3: the discovery script stops listing the third slot mid-run; its worker leaves
            at the next commit (exit status 0) and the job ends at size 2.
  reset_limit np 3, --min-np 1, --reset-limit 1, --blacklist-scope slot: a rank dies (one
            reset), then another; the launcher ends the job rather than reset a second time.
  cut       on a 3-host namespace cluster (test/cluster/cluster.sh, root), np 3, --min-np 2:
            rank 2's host drops off the network mid-training; its peers time out on it
            (--gloo-timeout-seconds 3), the launcher ends the unresponsive worker and the two
            others go on at size 2 from their last commit.
  cooldown  np 3, --min-np 2, a discovery script listing 3 slots, --blacklist-cooldown-range 1 2,
            --blacklist-scope slot: rank 2 dies; after its slot's cool-down the launcher starts a
            worker there again and the job ends at size 3.
  below_min np 3, --min-np 3, --blacklist-scope slot: a rank dies; the launcher ends the job
            at --elastic-timeout with an error that says why.
  keras_kill  kill's job in Keras (train_elastic_keras.py): model.fit under hvd.elastic.run with
            KerasState and the elastic callbacks; the survivors finish every epoch at size 2
            with equal weights.
Prints the recovery time (kill to the first step at the new size).
"""
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "cluster"))
from cluster import Cluster  # noqa: E402

WORKER = os.path.join(HERE, "train_elastic.py")
KERAS_WORKER = os.path.join(HERE, "train_elastic_keras.py")


def launch(binary, flags, env_extra, timeout, worker=WORKER):
    env = dict(os.environ, **env_extra)
    start = time.time()
    run = [binary] if os.path.basename(binary) == "horovodrun" else [binary, "run"]
    p = subprocess.run(run + flags + [sys.executable, worker], env=env,
                       capture_output=True, text=True, timeout=timeout)
    return p, time.time() - start


def fail(p, why):
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    sys.exit("FAIL: " + why)


def done_lines(out):
    return re.findall(r"DONE (?:STEP|EPOCH) (\d+) SIZE (\d+) RANK (\d+) EQUAL (\w+)", out)


def check_done(p, steps, size):
    done = done_lines(p.stdout)
    if p.returncode != 0:
        fail(p, "the launcher exited with %d" % p.returncode)
    if sorted(int(r) for _, _, r, _ in done) != list(range(size)):
        fail(p, "expected %d ranks to finish, got %s" % (size, done))
    for step, sz, _, equal in done:
        if int(step) != steps or int(sz) != size or equal != "True":
            fail(p, "a rank finished at step %s, size %s, parameters equal: %s" % (step, sz, equal))


def first_step_at_size(out, size, after):
    times = [float(t) for s, t in re.findall(r"STEP \d+ SIZE (\d+) AT ([\d.]+)", out)
             if int(s) == size and float(t) > after]
    return min(times) if times else None


def scenario_kill(binary, rank=2):
    horovod = "1" if os.path.basename(binary) == "horovodrun" else "0"
    # The killed rank alone on its host: a failure takes its whole host out (Horovod's
    # blacklist), here that one worker.
    hosts = "127.0.0.1:1,localhost:2" if rank == 0 else "localhost:2,127.0.0.1:1"
    p, took = launch(binary, ["-np", "3", "--min-np", "2", "--elastic-timeout", "30", "-H", hosts],
                     {"ELASTIC_TEST_KILL_AT": "10", "ELASTIC_TEST_KILL_RANK": str(rank),
                      "ELASTIC_TEST_HOROVOD": horovod}, 120)
    check_done(p, 40, 2)
    killed = re.search(r"KILLED AT ([\d.]+)", p.stdout)
    if not killed or "re-forming the job without it" not in p.stderr or \
            "membership 2, 2 workers (worker 127.0.0.1:0 failed)" not in p.stderr:
        fail(p, "the kill or the new membership was not reported")
    first = first_step_at_size(p.stdout, 2, float(killed.group(1)))
    print("kill rank %d: job %.1f s; recovery (kill to first step at size 2) %.3f s" %
          (rank, took, first - float(killed.group(1))))


def scenario_keras_kill(binary):
    p, took = launch(binary, ["-np", "3", "--min-np", "2", "--elastic-timeout", "30",
                              "-H", "localhost:2,127.0.0.1:1"],
                     {"ELASTIC_TEST_KILL_AT": "15"}, 120, worker=KERAS_WORKER)
    check_done(p, 4, 2)  # every epoch done
    killed = re.search(r"KILLED AT ([\d.]+)", p.stdout)
    # The last commit was the end of batch 5 (index 4) of epoch 1; the fit goes on from there.
    if not killed or "membership 2, 2 workers (worker 127.0.0.1:0 failed)" not in p.stderr or \
            p.stdout.count("SYNCED SIZE 2 EPOCH 1 BATCH 4") != 2:
        fail(p, "the kill, the new membership or the rollback to the last commit was not seen")
    first = first_step_at_size(p.stdout, 2, float(killed.group(1)))
    print("keras_kill: job %.1f s; recovery (kill to first batch at size 2) %.3f s" %
          (took, first - float(killed.group(1))))


def scenario_kill_in_recovery(binary):
    p, took = launch(binary, ["-np", "4", "--min-np", "2", "--start-timeout", "60",
                              "--blacklist-scope", "slot"],
                     {"ELASTIC_TEST_KILL_AT": "10", "ELASTIC_TEST_KILL_SIZE": "4",
                      "ELASTIC_TEST_KILL_RANK": "3", "ELASTIC_TEST_DIE_IN_RECOVERY": "1"}, 120)
    check_done(p, 40, 2)
    killed = re.search(r"KILLED IN RECOVERY AT ([\d.]+)", p.stdout)
    if not killed or "membership 3, 2 workers (worker localhost:2 failed)" not in p.stderr:
        fail(p, "the second failure or the third membership was not reported")
    first = first_step_at_size(p.stdout, 2, float(killed.group(1)))
    # Far below the start timeout (60 s) the rendezvous would otherwise wait.
    if first - float(killed.group(1)) > 15:
        fail(p, "recovery from the second failure took %.1f s" % (first - float(killed.group(1))))
    print("kill_in_recovery: job %.1f s; second kill to first step at size 2 %.3f s" %
          (took, first - float(killed.group(1))))


def scenario_host_ban(binary):
    p, took = launch(binary, ["-np", "4", "--min-np", "2", "-H", "localhost:2,127.0.0.1:2"],
                     {"ELASTIC_TEST_KILL_AT": "10", "ELASTIC_TEST_KILL_SIZE": "4",
                      "ELASTIC_TEST_KILL_RANK": "3"}, 120)
    check_done(p, 40, 2)
    for line in ["127.0.0.1 is not used again in this job",
                 "127.0.0.1 failed a worker; rank 2 (127.0.0.1:0) leaves the job",
                 "membership 2, 2 workers (worker 127.0.0.1:1 failed)",
                 "has been removed from elastic job; this worker ends"]:
        if line not in p.stderr:
            fail(p, "missing from the launcher's log: " + line)
    print("host_ban: job %.1f s" % took)


def discovery(tmp, first_line):
    """A hosts file and a discovery script that prints it."""
    hosts = os.path.join(tmp, "hosts")
    with open(hosts, "w") as f:
        f.write(first_line)
    script = os.path.join(tmp, "discover.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\ncat '%s'\n" % hosts)
    os.chmod(script, 0o755)
    return hosts, script


def growing_job(binary, env_extra):
    """-np 2 --max-np 3 on localhost:2; the worker adds 127.0.0.1:1 to the script's list."""
    with tempfile.TemporaryDirectory() as tmp:
        hosts, script = discovery(tmp, "localhost:2\n")
        return launch(binary, ["-np", "2", "--min-np", "2", "--max-np", "3",
                               "--host-discovery-script", script],
                      dict(env_extra, ELASTIC_TEST_HOSTS_FILE=hosts), 120)


def scenario_grow(binary):
    p, took = growing_job(binary, {"ELASTIC_TEST_GROW_AT": "5", "ELASTIC_TEST_STEPS": "120",
                                   "ELASTIC_TEST_STEP_SLEEP": "0.05"})
    check_done(p, 120, 3)
    if "membership 2, 3 workers (the discovery script listed 1 new slot and dropped 0)" not in p.stderr:
        fail(p, "the new membership was not reported")
    grown = re.search(r"STEP 5 SIZE 2 AT ([\d.]+)", p.stdout)
    first = first_step_at_size(p.stdout, 3, 0)
    print("grow: job %.1f s; from the slot's addition to the first step at size 3 %.3f s" %
          (took, first - float(grown.group(1))))


def scenario_finish_while_growing(binary):
    p, took = growing_job(binary, {"ELASTIC_TEST_GROW_AT": "2", "ELASTIC_TEST_STEPS": "30",
                                   "ELASTIC_TEST_STEP_SLEEP": "0.1",
                                   "ELASTIC_TEST_COMMIT_EVERY": "1000"})
    check_done(p, 30, 2)
    if "membership 2, 3 workers" not in p.stderr or \
            "the job finished before membership 2 formed; ending worker 127.0.0.1:0" \
            not in p.stderr:
        fail(p, "the stranded worker was not ended")
    if took > 20:
        fail(p, "the job took %.1f s: the stranded worker was left to its start timeout" % took)
    print("finish_while_growing: job %.1f s" % took)


def scenario_shrink(binary):
    with tempfile.TemporaryDirectory() as tmp:
        hosts, script = discovery(tmp, "localhost:3\n")
        p, took = launch(binary, ["-np", "3", "--min-np", "2", "--host-discovery-script", script],
                         {"ELASTIC_TEST_SHRINK_AT": "5", "ELASTIC_TEST_HOSTS_FILE": hosts,
                          "ELASTIC_TEST_STEPS": "60", "ELASTIC_TEST_STEP_SLEEP": "0.05"}, 120)
    check_done(p, 60, 2)
    if "no longer lists localhost:2; rank 2 leaves the job" not in p.stderr or \
            "membership 2, 2 workers (the discovery script listed 0 new slots and dropped 1)" \
            not in p.stderr or "membership 3" in p.stderr or \
            "has been removed from elastic job; this worker ends" not in p.stderr:
        fail(p, "the removal was not reported")
    print("shrink: job %.1f s" % took)


def scenario_cut(binary):
    with Cluster(3, tag="hel") as cluster:
        env = dict(os.environ, ELASTIC_TEST_DROP_AT="10", ELASTIC_TEST_KILL_SIZE="3",
                   ELASTIC_TEST_KILL_RANK="2", ELASTIC_TEST_COMMIT_EVERY="3")
        p = subprocess.Popen([binary, "run", "-np", "3", "--min-np", "2", "--elastic-timeout",
                              "30", "--gloo-timeout-seconds", "3"] + cluster.flags() +
                             [sys.executable, WORKER], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        timer = threading.Timer(120, p.terminate)
        timer.start()
        err = []
        reader = threading.Thread(target=lambda: err.append(p.stderr.read()), daemon=True)
        reader.start()
        out, cut_at = [], None
        for line in p.stdout:
            out.append(line)
            if "DROP LINK AT" in line and cut_at is None:
                cluster.shape(cluster.hosts[2], "100%")
                cut_at = time.time()
        p.wait()
        timer.cancel()
        reader.join()
    p.stdout, p.stderr = "".join(out), "".join(err)
    check_done(p, 40, 2)
    if cut_at is None or "worker %s:0 (rank 2) stopped responding" % cluster.hosts[2] not in \
            p.stderr or "membership 2, 2 workers" not in p.stderr:
        fail(p, "the cut or the unresponsive worker's end was not reported")
    if "EQUAL False" in p.stdout:
        fail(p, "parameters differ after the reset")
    first = first_step_at_size(p.stdout, 2, cut_at)
    if first - cut_at > 20:
        fail(p, "recovery took %.1f s" % (first - cut_at))
    print("cut: recovery (cut to first step at size 2) %.3f s" % (first - cut_at))


def scenario_cooldown(binary):
    with tempfile.TemporaryDirectory() as tmp:
        hosts, script = discovery(tmp, "localhost:3\n")
        p, took = launch(binary, ["-np", "3", "--min-np", "2", "--host-discovery-script", script,
                                  "--blacklist-cooldown-range", "1", "2",
                                  "--blacklist-scope", "slot"],
                         {"ELASTIC_TEST_KILL_AT": "5", "ELASTIC_TEST_STEPS": "150",
                          "ELASTIC_TEST_STEP_SLEEP": "0.05"}, 150)
    check_done(p, 150, 3)
    for line in ["membership 2, 2 workers (worker localhost:2 failed)",
                 "localhost:2's cool-down is over; it may be used again",
                 "membership 3, 3 workers (the discovery script listed 1 new slot"]:
        if line not in p.stderr:
            fail(p, "missing from the launcher's log: " + line)
    if not re.search(r"localhost:2 is not used for [12] s \(cool-down after 1 failure\)",
                     p.stderr):
        fail(p, "the cool-down was not announced")
    print("cooldown: job %.1f s" % took)


def scenario_below_min(binary):
    p, took = launch(binary, ["-np", "3", "--min-np", "3", "--elastic-timeout", "3",
                              "--blacklist-scope", "slot"],
                     {"ELASTIC_TEST_KILL_AT": "5"}, 60)
    if p.returncode != 1:
        fail(p, "expected exit code 1, got %d" % p.returncode)
    if "fewer than --min-np 3 workers (2) for 3 s (--elastic-timeout); ending the job" not in \
            p.stderr:
        fail(p, "no clear error for the job below --min-np")
    if took > 30:
        fail(p, "the job took %.1f s to end" % took)
    print("below_min: ended after %.1f s" % took)


def scenario_reset_limit(binary):
    p, took = launch(binary, ["-np", "3", "--min-np", "1", "--reset-limit", "1",
                              "--blacklist-scope", "slot"],
                     {"ELASTIC_TEST_KILL_AT": "5", "ELASTIC_TEST_KILL_AGAIN_AT": "10"}, 60)
    if p.returncode != 1:
        fail(p, "expected exit code 1, got %d" % p.returncode)
    if "membership 2, 2 workers" not in p.stderr or "membership 3" in p.stderr or \
            "already changed membership 1 time (--reset-limit 1); ending the job" not in p.stderr:
        fail(p, "no clear error at the reset limit")
    print("reset_limit: ended after %.1f s" % took)


if __name__ == "__main__":
    {"kill": scenario_kill, "kill_rank0": lambda b: scenario_kill(b, 0),
     "kill_in_recovery": scenario_kill_in_recovery, "grow": scenario_grow, "shrink": scenario_shrink,
     "cut": scenario_cut, "cooldown": scenario_cooldown, "below_min": scenario_below_min,
     "reset_limit": scenario_reset_limit, "keras_kill": scenario_keras_kill,
     "host_ban": scenario_host_ban, "finish_while_growing": scenario_finish_while_growing}[sys.argv[2]](sys.argv[1])
