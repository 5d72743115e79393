"""`pip install .`, then `pip install -e .`, into one fresh virtual environment that sees this
Python's packages (torch is not installed again), and every way of launching from outside the
source tree: `hvdsparse run`, `horovodrun` (the Horovod alias), mpirun (also with
`python -m hvdsparse.alias`) and torchrun. Also: the wheel is tagged for this platform, the
launchers land in the environment's bin/, and check-build run from the environment without
activating it finds the frameworks.

    python3 pip_install_test.py SOURCE_ROOT

Offline: `--no-build-isolation --no-index` (setuptools, wheel and cloudpickle come from this
Python). Every command has a deadline; at it the process group this test started is killed.
"""
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

WORKER = r'''
import sys
import torch
import hvdsparse.torch as hvd
hvd.init()
total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum)
want = hvd.size() * (hvd.size() + 1) / 2
assert total.item() == want, (total.item(), want)
print("WORKER OK rank %d of %d from %s" % (hvd.rank(), hvd.size(), hvd.__file__), flush=True)
hvd.shutdown()
'''

HOROVOD_SCRIPT = r'''
import torch
import horovod.torch as hvd
hvd.init()
assert hvd.__name__ == "hvdsparse.torch", hvd.__name__
total = hvd.allreduce(torch.ones(3), op=hvd.Sum)
assert total.tolist() == [float(hvd.size())] * 3, total
print("HOROVOD OK rank %d of %d" % (hvd.rank(), hvd.size()), flush=True)
'''

KERAS_ALIASES = r'''
import horovod.keras, horovod.tensorflow, horovod.tensorflow.keras
assert horovod.keras.__name__ == "hvdsparse.tensorflow.keras", horovod.keras.__name__
assert horovod.tensorflow.__name__ == "hvdsparse.tensorflow", horovod.tensorflow.__name__
print("KERAS ALIASES OK", flush=True)
'''

failures = []


def run(cmd, cwd, env, timeout, label):
    """Runs cmd in its own session; at the deadline kills that session's process group."""
    start = time.time()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        failures.append("%s: no answer within %d s\n%s" % (label, timeout, out))
        return 124, out
    print("%s: exit %d after %.1f s" % (label, proc.returncode, time.time() - start), flush=True)
    return proc.returncode, out


def expect(label, rc, out, *needles, count=1):
    if rc != 0:
        failures.append("%s: exit code %d\n%s" % (label, rc, out))
        return
    for needle in needles:
        if out.count(needle) < count:
            failures.append("%s: %r %d times expected\n%s" % (label, needle, count, out))


def clean_env(venv, activated):
    """This environment without the source tree's paths; with the venv's bin/ first when
    activated."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "HVDSPARSE_LIBRARY", "VIRTUAL_ENV")
           and not k.startswith(("HVDSPARSE_", "HOROVOD_", "OMPI_COMM_WORLD", "PMI_"))}
    env["OMPI_ALLOW_RUN_AS_ROOT"] = env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    if activated:
        env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env.get("PATH", "")
        env["VIRTUAL_ENV"] = venv
    return env


def launch_everywhere(venv, work, label):
    """Every launcher, from work (outside the source tree), with the venv's Python."""
    env = clean_env(venv, activated=True)
    python = os.path.join(venv, "bin", "python")
    worker = os.path.join(work, "worker.py")
    horovod_script = os.path.join(work, "horovod_script.py")
    rc, out = run(["hvdsparse", "run", "-np", "2", "python", worker], work, env, 180,
                  label + " hvdsparse run")
    expect(label + " hvdsparse run", rc, out, "WORKER OK", count=2)
    if "site-packages" not in out and label == "pip install .":
        failures.append("%s: hvdsparse not loaded from the environment\n%s" % (label, out))
    rc, out = run(["horovodrun", "-np", "2", "--mpi", "python", horovod_script], work, env, 180,
                  label + " horovodrun")
    expect(label + " horovodrun", rc, out, "HOROVOD OK", "--mpi has no effect")
    mpirun = shutil.which("mpirun")
    if mpirun:
        base = [mpirun, "--oversubscribe", "--bind-to", "none", "-np", "2"]
        rc, out = run(base + [python, worker], work, env, 180, label + " mpirun")
        expect(label + " mpirun", rc, out, "WORKER OK", count=2)
        rc, out = run(base + [python, "-m", "hvdsparse.alias", horovod_script], work, env, 180,
                      label + " mpirun alias")
        expect(label + " mpirun alias", rc, out, "HOROVOD OK", count=2)
    # torchrun --standalone picks MASTER_PORT and our store the next one, which another process
    # may hold by chance: then the job says so, and a second try gets fresh ports.
    for _ in range(2):
        rc, out = run([python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                       "2", worker], work, env, 240, label + " torchrun")
        if rc == 0 or "Address already in use" not in out:
            break
    expect(label + " torchrun", rc, out, "WORKER OK", count=2)


def main():
    root = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix="hvds_pip_")
    venv = os.path.join(work, "venv")
    # What `pip install -e .` puts next to the sources; removed after unless it was there before.
    package = os.path.join(root, "frameworks", "common", "hvdsparse")
    in_tree = [p for p in (os.path.join(package, "libhvdsparse.so"), os.path.join(package, "bin"))
               if not os.path.exists(p)]
    try:
        for name, text in (("worker.py", WORKER), ("horovod_script.py", HOROVOD_SCRIPT),
                           ("keras_aliases.py", KERAS_ALIASES)):
            with open(os.path.join(work, name), "w") as f:
                f.write(text)
        rc, out = run([sys.executable, "-m", "venv", "--system-site-packages", venv], work,
                      clean_env(venv, False), 120, "venv")
        expect("venv", rc, out)
        pip = [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q",
               "--no-build-isolation", "--no-index"]

        rc, out = run(pip + [root], work, clean_env(venv, False), 1200, "pip install .")
        expect("pip install .", rc, out)
        for launcher in ("hvdsparse", "horovodrun"):
            if not os.access(os.path.join(venv, "bin", launcher), os.X_OK):
                failures.append("pip install .: no %s in the environment's bin/" % launcher)
        wheel = glob.glob(os.path.join(venv, "lib", "python*", "site-packages",
                                       "hvdsparse-*.dist-info", "WHEEL"))
        tags = open(wheel[0]).read() if wheel else ""
        if "Root-Is-Purelib: false" not in tags or "Tag: py3-none-any" in tags:
            failures.append("pip install .: the wheel is not tagged for this platform:\n" + tags)
        launch_everywhere(venv, work, "pip install .")
        rc, out = run([os.path.join(venv, "bin", "python"), "-m", "hvdsparse.alias",
                       os.path.join(work, "keras_aliases.py")], work, clean_env(venv, False),
                      240, "keras aliases")
        expect("keras aliases", rc, out, "KERAS ALIASES OK")
        # From the environment's bin/ without activating it: it finds its own python3.
        rc, out = run([os.path.join(venv, "bin", "horovodrun"), "--check-build"], work,
                      clean_env(venv, False), 300, "check-build")
        expect("check-build", rc, out, "[X] PyTorch", "[ ] device library")

        rc, out = run(pip + ["-e", root], work, clean_env(venv, False), 1200, "pip install -e .")
        expect("pip install -e .", rc, out)
        launch_everywhere(venv, work, "pip install -e .")
    finally:
        for path in in_tree:
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            elif os.path.exists(path):
                os.unlink(path)
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print("\n\n".join("FAIL: " + f for f in failures))
        return 1
    print("PASS: pip install . and -e . launch under hvdsparse run, horovodrun, mpirun, torchrun")
    return 0


if __name__ == "__main__":
    sys.exit(main())
