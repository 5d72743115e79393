"""Runs `hvdsparse-perf sparse_allreduce --algorithm all --csv` under the launcher, in blocks and
with --interleave, and checks its rows: every algorithm present, no wrong element (the tool
compares each algorithm's result with the dense allreduce's), more timed operations than -n
where --min-time asks for them (operations under 10 ms), times positive and the
minimum at most the median; --algorithm with names separated by commas gives those rows, and an
unknown name among them is refused. With the runtime library as LIB, also that the rows carry
what the cost model was given: priced again through the library (bench/sparse_replay.py), each row's
inputs give its model_ms, and the auto row's the runtime's pick. A job that hangs fails after
JOB_TIMEOUT seconds.

    python3 sparse_perf_check.py LAUNCHER PERF NP [LIB]
"""
import csv
import io
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))

ALGOS = ["allreduce", "auto", "dense", "allgather", "ssar_recursive_doubling",
         "ssar_split_allgather", "dsar_split_allgather", "zen"]
JOB_TIMEOUT = 90  # seconds per job; then the launcher (our child, by its pid) is stopped


def run(launcher, perf, np, extra, algorithm="all"):
    cmd = [launcher, "run", "-np", str(np), perf, "sparse_allreduce", "-N", "64K", "--density",
           "0.02", "--generator", "zipf", "--algorithm", algorithm, "-n", "2", "-w", "1",
           "--min-time", "0.05", "--csv"] + extra
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=JOB_TIMEOUT)
    except subprocess.TimeoutExpired:
        p.terminate()  # the launcher ends its ranks on SIGTERM
        try:
            p.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
        sys.exit("FAIL: %s hung for %d s" % (" ".join(cmd), JOB_TIMEOUT))
    if p.returncode != 0:
        sys.exit("FAIL: %s exited %d\n%s\n%s" % (" ".join(cmd), p.returncode, out, err))
    lines = [l.split(":", 1)[1] if l.startswith("[0]<stdout>:") else l for l in out.splitlines()]
    lines = [l for l in lines if l and not l.startswith("#") and not l.startswith("[")]
    return list(csv.DictReader(io.StringIO("\n".join(lines))))


def check(rows, mode, algos=ALGOS):
    names = [r["algorithm"] for r in rows]
    if names != algos:
        sys.exit("FAIL (%s): rows %s, expected %s" % (mode, names, algos))
    for r in rows:
        what = "%s %s" % (mode, r["algorithm"])
        if int(r["wrong"]) != 0:
            sys.exit("FAIL (%s): %s wrong elements" % (what, r["wrong"]))
        t, lo = float(r["time_ms"]), float(r["min_ms"])
        if not (0 < lo <= t):
            sys.exit("FAIL (%s): median %s ms, minimum %s ms" % (what, t, lo))
        # --min-time 0.05 asks for about 50 ms of operations: more than -n 2 when each is
        # short (a sanitizer build can make the dense ones longer than 25 ms).
        if t < 10 and int(r["iters"]) <= 2:
            sys.exit("FAIL (%s): %s timed operations; --min-time 0.05 asks for more than -n 2 "
                     "at %.3f ms each" % (what, r["iters"], t))
    print("%s: %s" % (mode, ", ".join("%s %s x %.2f ms" % (r["algorithm"], r["iters"],
                                                             float(r["time_ms"])) for r in rows)))


def check_replay(rows, lib_path):
    import sparse_replay
    lib = sparse_replay.load(lib_path)
    for r in rows:
        if r["algorithm"] == "allreduce":
            continue
        costs = sparse_replay.price(lib, r)
        ran, model = r["ran"], float(r["model_ms"])
        again = costs[ran] * 1e3
        if abs(again - model) > 0.01 * model + 1e-3:
            sys.exit("FAIL (replay %s): model_ms %s, priced again from the row %.4f" % (
                r["algorithm"], model, again))
        if r["algorithm"] == "auto" and sparse_replay.pick_of(costs) != r["pick"]:
            sys.exit("FAIL (replay): the runtime picked %s, the row's inputs give %s (%s)" % (
                r["pick"], sparse_replay.pick_of(costs), costs))
    print("replay: every row's model_ms and the pick priced again from the rows")


def main():
    launcher, perf, np = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rows = run(launcher, perf, np, [])
    check(rows, "blocks")
    if len(sys.argv) > 4:
        check_replay(rows, sys.argv[4])
    check(run(launcher, perf, np, ["--interleave"]), "interleaved")
    # Names separated by commas: the reference and those rows, in the tool's order.
    check(run(launcher, perf, np, [], "zen,allgather"), "two", ["allreduce", "allgather", "zen"])
    bad = subprocess.run([perf, "sparse_allreduce", "--algorithm", "zen,zenn"],
                         capture_output=True, text=True, timeout=JOB_TIMEOUT)
    if bad.returncode != 2 or "unknown --algorithm 'zenn'" not in bad.stderr:
        sys.exit("FAIL: --algorithm zen,zenn exited %d: %s" % (bad.returncode, bad.stderr))
    print("OK")


if __name__ == "__main__":
    main()
