#!/usr/bin/env python3
"""Runs Horovod's elastic integration tests (test/integration/test_elastic_torch.py and
test_elastic_tensorflow2.py of its sources) against hvdsparse's `horovodrun`.

Those tests write a host-discovery script from a schedule, start Horovod's launcher from Python
(`horovod.runner.launch.parse_args()` then `_run_elastic(args)` on a `horovodrun ...` command
line, with two of its driver's timings patched by `mock`), and check the log their training
script (test/integration/data/elastic_*_main.py) writes at every epoch: rank, size, host and how
many times the job met. hvdsparse has no Python launcher: this runner puts in those entry
points a call of the `horovodrun` given with --launcher on the same command line, which raises
RuntimeError with the launcher's message when the job fails, and the launcher's own message for
an exceeded reset limit. Every schedule, script and assertion stays as Horovod wrote it; each
test runs as its own pytest job with a time limit.

Usage: run_elastic_integration.py --horovod-src DIR --launcher build/bin/horovodrun
       [--file test_elastic_torch.py] [--python PY] [--timeout 300] [-k EXPR] [--json OUT]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

OUTCOME = re.compile(r"\b(\d+) (passed|failed|skipped|error|errors)\b")

# Imported by pytest (-p) in the test process, before the test module: the launcher's Python
# entry points and the driver constants the tests patch, as modules of the `horovod` alias.
SHIM = '''
import os
import subprocess
import sys
import types

import horovod.runner.common.util  # the alias packages the stand-ins hang from


def _module(name, **attrs):
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    setattr(sys.modules[parent], child, module)
    return module


def parse_args():
    return list(sys.argv[1:])


def _run_elastic(args):
    proc = subprocess.run([os.environ["HVDSPARSE_HOROVODRUN"]] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=float(os.environ["HVDSPARSE_JOB_SECONDS"]))
    sys.stdout.write(proc.stdout)
    if proc.returncode != 0:
        raise RuntimeError("horovodrun exited with status %d:\\n%s"
                           % (proc.returncode, proc.stdout[-6000:]))


_module("horovod.runner.launch", parse_args=parse_args, _run_elastic=_run_elastic)
_module("horovod.runner.common.util.config_parser", set_env_from_args=lambda env, args: None)
_module("horovod.runner.elastic")
_module("horovod.runner.elastic.constants",
        RESET_LIMIT_EXCEEDED_MESSAGE="Horovod was shutdown because number of resets during "
                                     "elastic job exceeded limit: {}")
_module("horovod.runner.elastic.driver", DISCOVER_HOSTS_FREQUENCY_SECS=1.0,
        ELASTIC_TIMEOUT_SECS=600)
_module("horovod.runner.gloo_run", _get_min_start_hosts=lambda *args: 1)
'''


def collect(args, folder, env):
    cmd = [args.python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
           "-p", "hvdsparse_launcher_shim", args.file]
    if args.expr:
        cmd += ["-k", args.expr]
    out = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    ids = [line.strip() for line in out.stdout.splitlines() if "::" in line]
    if not ids:
        sys.exit("run_elastic_integration: pytest collected nothing from %s:\n%s%s"
                 % (args.file, out.stdout[-3000:], out.stderr[-3000:]))
    return ids


def run_one(args, folder, env, node):
    """(outcome, seconds, tail of the output) of one test in its own pytest process."""
    import time
    start = time.monotonic()
    cmd = [args.python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
           "-p", "hvdsparse_launcher_shim", node]
    try:
        out = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True,
                             timeout=args.timeout, start_new_session=True)
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) \
            else (e.stdout or "")
        return "hang", time.monotonic() - start, text[-4000:]
    counts = {kind: int(n) for n, kind in OUTCOME.findall(out.stdout)}
    if counts.get("failed") or counts.get("error") or counts.get("errors"):
        outcome = "failed"
    elif counts.get("passed"):
        outcome = "passed"
    elif counts.get("skipped"):
        outcome = "skipped"
    else:
        outcome = "failed"
    return outcome, time.monotonic() - start, (out.stdout + out.stderr)[-4000:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horovod-src", required=True, help="Horovod's source tree")
    parser.add_argument("--launcher", required=True, help="hvdsparse's horovodrun")
    parser.add_argument("--file", default="test_elastic_torch.py")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per test")
    parser.add_argument("-k", dest="expr", default=None)
    parser.add_argument("--json", default=None, help="write every test's outcome here")
    args = parser.parse_args()

    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    launcher = os.path.abspath(args.launcher)
    scratch = tempfile.mkdtemp(prefix="hvds_elastic_it_")
    try:
        shutil.copytree(os.path.join(args.horovod_src, "test"), os.path.join(scratch, "test"))
        folder = os.path.join(scratch, "test", "integration")
        with open(os.path.join(folder, "hvdsparse_launcher_shim.py"), "w") as f:
            f.write(SHIM)
        env = dict(os.environ)
        # test/utils holds the `common` helpers (Horovod's CI puts it on the path too)
        paths = [folder, os.path.join(scratch, "test", "utils"),
                 os.path.join(root, "frameworks", "alias")] + [
            os.path.join(root, "frameworks", sub) for sub in ("common", "pytorch", "tensorflow")]
        env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env["PATH"] = os.path.dirname(launcher) + os.pathsep + env.get("PATH", "")
        env["HVDSPARSE_HOROVODRUN"] = launcher
        env["HVDSPARSE_JOB_SECONDS"] = str(max(30.0, args.timeout - 30.0))
        nodes = collect(args, folder, env)
        print("%s: %d tests, one job each" % (args.file, len(nodes)), flush=True)
        results = []
        for node in nodes:
            outcome, seconds, tail = run_one(args, folder, env, node)
            results.append({"test": node, "outcome": outcome, "seconds": round(seconds, 1)})
            print("%-8s %6.1f s  %s" % (outcome, seconds, node), flush=True)
            if outcome in ("failed", "hang"):
                print("    " + tail.replace("\n", "\n    ")[-3000:], flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    totals = {k: sum(r["outcome"] == k for r in results)
              for k in ("passed", "failed", "skipped", "hang")}
    print("| file | passed | failed | skipped | hangs |")
    print("| `%s` (%d tests) | %d | %d | %d | %d |" % (args.file, len(results), totals["passed"],
                                                      totals["failed"], totals["skipped"],
                                                      totals["hang"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
