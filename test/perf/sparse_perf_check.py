"""Runs `hvdsparse-perf sparse_allreduce --algorithm all --csv` under the launcher, in blocks and
with --interleave, and checks its rows: every algorithm present, no wrong element (the tool
compares each algorithm's result with the dense allreduce's), more timed operations than -n
where --min-time asks for them (these are millisecond operations), times positive and the
minimum at most the median. A job that hangs fails after JOB_TIMEOUT seconds.

    python3 sparse_perf_check.py LAUNCHER PERF NP
"""
import csv
import io
import subprocess
import sys

ALGOS = ["allreduce", "auto", "dense", "allgather", "ssar_recursive_doubling",
         "ssar_split_allgather", "dsar_split_allgather", "zen"]
JOB_TIMEOUT = 90  # seconds per job; then the launcher (our child, by its pid) is stopped


def run(launcher, perf, np, extra):
    cmd = [launcher, "run", "-np", str(np), perf, "sparse_allreduce", "-N", "64K", "--density",
           "0.02", "--generator", "zipf", "--algorithm", "all", "-n", "2", "-w", "1",
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


def check(rows, mode):
    names = [r["algorithm"] for r in rows]
    if names != ALGOS:
        sys.exit("FAIL (%s): rows %s, expected %s" % (mode, names, ALGOS))
    for r in rows:
        what = "%s %s" % (mode, r["algorithm"])
        if int(r["wrong"]) != 0:
            sys.exit("FAIL (%s): %s wrong elements" % (what, r["wrong"]))
        t, lo = float(r["time_ms"]), float(r["min_ms"])
        if not (0 < lo <= t):
            sys.exit("FAIL (%s): median %s ms, minimum %s ms" % (what, t, lo))
        if int(r["iters"]) <= 2:
            sys.exit("FAIL (%s): %s timed operations; --min-time 0.05 asks for more than -n 2 "
                     "at %.3f ms each" % (what, r["iters"], t))
    print("%s: %s" % (mode, ", ".join("%s %s x %.2f ms" % (r["algorithm"], r["iters"],
                                                             float(r["time_ms"])) for r in rows)))


def main():
    launcher, perf, np = sys.argv[1], sys.argv[2], int(sys.argv[3])
    check(run(launcher, perf, np, []), "blocks")
    check(run(launcher, perf, np, ["--interleave"]), "interleaved")
    print("OK")


if __name__ == "__main__":
    main()
