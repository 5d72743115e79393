"""Pieces every part of the benchmark suite shares: sizes, the CSV rows all the drivers print,
and starting groups of processes with a deadline (killing their process groups on the way out)."""
import argparse
import csv
import os
import re
import signal
import subprocess
import tempfile
import time

# The CSV columns of hvdsparse-perf --csv and of every driver in bench/peers/.
FIELDS = ["impl", "coll", "np", "bytes", "count", "dtype", "redop", "time_us", "min_us",
          "algbw_gbs", "busbw_gbs", "wrong", "max_err", "max_us", "first_us"]
# The launcher prefixes its workers' lines with "[rank]<stdout>:".
PREFIX = re.compile(r"^\[\d+\]<std(?:out|err)>:")


def parse_size(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMG]?)B?", text.strip(), re.I)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r}")
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]
    return int(float(m.group(1)) * scale)


def parse_sizes(text):
    """'1M:256M:4' (first:last:factor) or a list '16M,64M,256M'; returns sorted bytes."""
    if ":" in text:
        lo, hi, f = text.split(":")
        lo, hi, f = parse_size(lo), parse_size(hi), int(f)
        if f < 2 or lo <= 0:
            raise argparse.ArgumentTypeError("factor must be >= 2 and the first size > 0")
        sizes = []
        while lo <= hi:
            sizes.append(lo)
            lo *= f
        return sizes
    return sorted(parse_size(s) for s in text.split(",") if s)


def human(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def sweeps(sizes):
    """Groups sizes into the (first, last, factor) sweeps the drivers take (-b -e -f)."""
    if len(sizes) == 1:
        return [(sizes[0], sizes[0], 2)]
    f = sizes[1] // sizes[0]
    if f >= 2 and all(b == a * f for a, b in zip(sizes, sizes[1:])):
        return [(sizes[0], sizes[-1], f)]
    return [(s, s, 2) for s in sizes]


def kill_group(proc):
    """Kills the process group started for proc (start_new_session=True) and reaps proc."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def run_procs(cmds, timeout, envs=None):
    """Starts every command in its own session and waits for all of them. Returns (rc, stdout of
    the first command, stderr of all); rc is the first non-zero exit status, else 0. Raises
    TimeoutError after killing them all when the deadline passes; kills them on any exit."""
    envs = envs or [None] * len(cmds)
    outs = [tempfile.TemporaryFile() for _ in cmds]
    errs = [tempfile.TemporaryFile() for _ in cmds]
    procs = []
    try:
        for c, o, e, env in zip(cmds, outs, errs, envs):
            procs.append(subprocess.Popen(c, stdout=o, stderr=e, start_new_session=True,
                                          env=env))
        deadline = time.monotonic() + timeout
        pending = list(procs)
        while pending:  # a rank that fails early must not leave the others waiting forever
            pending = [p for p in pending if p.poll() is None]
            if any(p.returncode not in (None, 0) for p in procs):
                time.sleep(2)  # let the others report their own error first
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:.0f} s: {' '.join(cmds[0])}")
            time.sleep(0.05)
    finally:
        for p in procs:
            kill_group(p)
    rc = next((p.returncode for p in procs if p.returncode != 0), 0)
    outs[0].seek(0)
    stdout = outs[0].read().decode(errors="replace")
    stderr = ""
    for e in errs:
        e.seek(0)
        stderr += e.read().decode(errors="replace")
    return rc, stdout, stderr


def parse_rows(stdout):
    """The CSV rows in a driver's output (comments, headers and other lines skipped)."""
    rows = []
    for line in stdout.splitlines():
        line = PREFIX.sub("", line).strip()
        if not line or line.startswith("#") or line.startswith("impl,"):
            continue
        vals = next(csv.reader([line]))
        if len(vals) == len(FIELDS) - 2:  # a driver from before max_us and first_us
            vals += ["nan", "nan"]
        if len(vals) != len(FIELDS):
            continue
        try:
            row = dict(zip(FIELDS, vals))
            for k in ("np", "bytes", "count", "wrong"):
                row[k] = int(row[k])
            for k in ("time_us", "min_us", "algbw_gbs", "busbw_gbs", "max_err", "max_us",
                      "first_us"):
                row[k] = float(row[k])
        except ValueError:
            continue
        rows.append(row)
    return rows


def torch_worker_env(build):
    """This environment plus what a torch worker of the build needs: hvdsparse's Python packages
    first on PYTHONPATH, and the build's library unless HVDSPARSE_LIBRARY names one."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(root, "frameworks", d) for d in ("common", "pytorch")] +
        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("HVDSPARSE_LIBRARY", os.path.join(os.path.abspath(build), "lib",
                                                     "libhvdsparse.so"))
    return env
