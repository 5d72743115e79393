"""Runs bench/allreduce_stability.py (part of `make bench`) at its smallest, np 2 at 64 KiB, two
rounds of a few operations, and checks what it wrote: every round holds its six jobs (hvdsparse's
long and short runs, Open MPI's, the machine's memory pass and its exchange pass long and short),
each with a positive time and the operations asked for, and the table one row whose spreads are
the rounds' max/min, the machine's among them, and whose machine short / long is the exchange
pass's. Then memory_pass alone: a pass prints its CSV row with min <= median <= max, with and
without -x (whose threads check that every part came back), on parts of unequal length and in
several rounds too; --times appends one line per pass in order, --pause or not; a call without
a size exits 2 with its usage. hvdsparse-perf's --pause: the job idles for it at every size
(no sooner done than the pauses add up), its --times rows stay in order, and a bad value is
refused before anything starts. Each job has the script's own time limit.

    python3 stability_check.py BUILD_DIR
"""
import csv
import os
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
IMPLS = ["hvdsparse", "hvdsparse-short", "mpi", "machine", "exchange", "exchange-short"]


def fail(msg):
    sys.exit("FAIL: " + msg)


def check_table(build, out):
    cmd = [sys.executable, os.path.join(ROOT, "bench", "allreduce_stability.py"), "--build", build,
           "--out", out, "--np", "2", "--sizes", "64K", "--runs", "2", "--long", "30", "--short",
           "5", "--warmup", "1", "--timeout", "60"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        fail("%s exited %d: %s" % (" ".join(cmd), r.returncode, r.stderr[-2000:]))
    with open(os.path.join(out, "stability_raw.csv")) as f:
        raw = list(csv.DictReader(f))
    for run in ("0", "1"):
        got = sorted(row["impl"] for row in raw if row["run"] == run)
        if got != sorted(IMPLS):
            fail("round %s ran %s, not one job of each of %s" % (run, got, IMPLS))
    for row in raw:
        want = "5" if row["impl"].endswith("-short") else "30"
        if float(row["time_us"]) <= 0 or row["iters"] != want or row["bytes"] != "65536":
            fail("implausible row %s" % row)
    with open(os.path.join(out, "stability.md")) as f:
        lines = [ln for ln in f.read().splitlines() if ln.startswith("| 2 |")]
    if len(lines) != 1:
        fail("the table has %d rows for np 2, not 1" % len(lines))
    cells = [c.strip() for c in lines[0].strip("|").split("|")]
    if len(cells) != 13:
        fail("a row of %d cells, not 13: %s" % (len(cells), lines[0]))

    def times(impl):
        return [float(row["time_us"]) for row in raw if row["impl"] == impl]

    machine, exchange, short = times("machine"), times("exchange"), times("exchange-short")
    if abs(float(cells[10]) - max(machine) / min(machine)) > 0.006:
        fail("the machine's max/min reads %s, its runs %s" % (cells[10], machine))
    if abs(float(cells[11].split(", ")[1]) - max(exchange) / min(exchange)) > 0.006:
        fail("the exchange pass's max/min reads %s, its runs %s" % (cells[11], exchange))
    warming = (sum(short) / 2) / (sum(exchange) / 2)  # two rounds: the median is the mean
    if abs(float(cells[7]) - warming) > 0.006:
        fail("the exchange pass's short / long reads %s, its runs %s and %s"
             % (cells[7], short, exchange))


def check_memory_pass(build):
    tool = os.path.join(build, "bin", "memory_pass")
    for size, threads, extra in (("64K", "2", []), ("64K", "2", ["-x"]), ("1000", "3", ["-x"]),
                                 ("1M", "3", ["-x", "-r", "256K"])):
        r = subprocess.run([tool, "-b", size, "-t", threads, "-n", "5", "--csv"] + extra,
                           capture_output=True, text=True, timeout=60)
        rows = r.stdout.split()
        if r.returncode != 0 or len(rows) != 2:
            fail("memory_pass %s exited %d: %s %s" % (extra, r.returncode, r.stdout, r.stderr))
        row = dict(zip(rows[0].split(","), rows[1].split(",")))
        want = str(int(size.strip("KM")) * {"K": 1 << 10, "M": 1 << 20}.get(size[-1], 1))
        if row["bytes"] != want or row["threads"] != threads or row["iters"] != "5":
            fail("memory_pass row %s" % row)
        if not 0 < float(row["min_us"]) <= float(row["time_us"]) <= float(row["max_us"]):
            fail("memory_pass times out of order: %s" % row)
    path = os.path.join(build, "test-stability-times.csv")
    if os.path.exists(path):
        os.remove(path)
    for pause in ([], ["--pause", "5"]):  # appends; the second idles before its middle pass
        r = subprocess.run([tool, "-b", "64K", "-t", "2", "-x", "-n", "7", "-w", "0", "--times",
                            path] + pause, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            fail("memory_pass --times exited %d: %s" % (r.returncode, r.stderr))
    with open(path) as f:
        rows = [ln.split(",") for ln in f.read().split()]
    if [(b, int(i)) for b, i, _ in rows] != [("65536", i) for i in range(7)] * 2 or \
            min(float(t) for _, _, t in rows) <= 0:
        fail("memory_pass --times wrote %s" % rows)
    r = subprocess.run([tool, "-t", "2"], capture_output=True, text=True, timeout=60)
    if r.returncode != 2 or "usage: memory_pass -b SIZE" not in r.stderr:
        fail("memory_pass without a size exited %d: %s" % (r.returncode, r.stderr))


def check_perf_pause(build):
    b = os.path.join(build, "bin")
    path = os.path.join(build, "test-stability-perf-times.csv")
    if os.path.exists(path):
        os.remove(path)
    cmd = [os.path.join(b, "hvdsparse"), "run", "-np", "2", os.path.join(b, "hvdsparse-perf"),
           "allreduce", "-b", "64K", "-e", "128K", "-n", "6", "-w", "0", "--pause", "600",
           "--times", path]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        fail("hvdsparse-perf --pause exited %d: %s" % (r.returncode, r.stderr[-2000:]))
    if wall < 1.2:
        fail("two sizes with --pause 600 ended after %.2f s: the ranks did not idle" % wall)
    with open(path) as f:
        rows = [ln.split(",") for ln in f.read().split()]
    want = [(b, i) for b in ("65536", "131072") for i in range(6)]
    if [(b, int(i)) for b, i, _ in rows] != want or min(float(t) for _, _, t in rows) <= 0:
        fail("hvdsparse-perf --pause --times wrote %s" % rows)
    r = subprocess.run([os.path.join(b, "hvdsparse-perf"), "allreduce", "--pause", "-5"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode == 0 or "--pause needs milliseconds" not in r.stderr:
        fail("hvdsparse-perf --pause -5 exited %d: %s" % (r.returncode, r.stderr))


def main():
    build = os.path.abspath(sys.argv[1])
    out = os.path.join(build, "test-stability")
    check_memory_pass(build)
    check_perf_pause(build)
    check_table(build, out)
    print("OK: six jobs per round, the table's spreads and short / long, memory_pass's rows, "
          "times and usage, hvdsparse-perf's pauses")


if __name__ == "__main__":
    main()
