"""`python -m hvdsparse.alias` where another `horovod` package is importable: the alias wins
(the user asked for it) and says so on stderr, naming the package it hides; without the opt-in
the other package is what `import horovod` gives.

    python3 alias_over_installed_horovod.py"""
import os
import subprocess
import sys
import tempfile

PROBE = "import horovod.torch as hvd\nprint('LOADED', hvd.__name__)\n"


def main():
    with tempfile.TemporaryDirectory() as tmp:
        fake = os.path.join(tmp, "site", "horovod")
        os.makedirs(os.path.join(fake, "torch"))
        for sub in ("", "torch"):
            with open(os.path.join(fake, sub, "__init__.py"), "w") as f:
                f.write("# another Horovod\n")
        probe = os.path.join(tmp, "probe.py")
        with open(probe, "w") as f:
            f.write(PROBE)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([os.path.join(tmp, "site"), env.get("PYTHONPATH", "")])
        failures = []
        aliased = subprocess.run([sys.executable, "-m", "hvdsparse.alias", probe], env=env,
                                 capture_output=True, text=True, timeout=120)
        if "LOADED hvdsparse.torch" not in aliased.stdout:
            failures.append("with the alias: " + aliased.stdout + aliased.stderr)
        if "loads hvdsparse, not the Horovod at " + fake not in aliased.stderr:
            failures.append("no notice naming the hidden Horovod: " + aliased.stderr)
        plain = subprocess.run([sys.executable, probe], env=env, capture_output=True, text=True,
                               timeout=120)
        if "LOADED horovod.torch" not in plain.stdout:
            failures.append("without the alias: " + plain.stdout + plain.stderr)
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
