"""Runs a Horovod script on hvdsparse under any launcher: the opt-in Horovod alias.

    mpirun -np 4 python -m hvdsparse.alias train.py --lr 0.1
    torchrun --nproc-per-node 4 -m hvdsparse.alias train.py
    srun python -m hvdsparse.alias -m mypackage.train

In the process it starts (and in every Python process that one starts, through PYTHONPATH),
`import horovod.torch`, `horovod.tensorflow`, `horovod.tensorflow.keras` and `horovod.keras` load
hvdsparse. Nothing changes for a process not started this way, so an installed Horovod is never
shadowed without asking; when one is installed, this says so on stderr. `hvdsparse run
--horovod-alias` and `horovodrun` do the same for the workers they start.
"""
import importlib.util
import os
import runpy
import sys
import sysconfig

USAGE = "usage: python -m hvdsparse.alias (SCRIPT | -m MODULE) [ARGS ...]"


def alias_dir():
    """The directory holding the `horovod` alias package: installed under <prefix>/share, or in
    the source tree next to this package's frameworks/ folder."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(base, "share", "hvdsparse", "alias")
                  for base in (sysconfig.get_path("data"), sys.prefix)]
    candidates.append(os.path.join(os.path.dirname(os.path.dirname(here)), "alias"))
    for path in candidates:
        if os.path.isfile(os.path.join(path, "horovod", "__init__.py")):
            return path
    raise ImportError("hvdsparse: the Horovod alias is not installed; looked in "
                      + ", ".join(candidates))


def enable():
    """Puts the alias on sys.path right after the script's directory, and first on PYTHONPATH;
    returns its directory."""
    path = alias_dir()
    spec = importlib.util.find_spec("horovod") if "horovod" not in sys.modules else None
    origin = spec.origin if spec is not None else None
    if origin and not os.path.abspath(origin).startswith(path + os.sep):
        sys.stderr.write("hvdsparse: `import horovod` loads hvdsparse, not the Horovod at %s\n"
                         % os.path.dirname(origin))
    sys.path.insert(1 if sys.path else 0, path)
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = path + (os.pathsep + old if old else "")
    return path


def main(argv):
    if not argv or argv[0] in ("-h", "--help") or (argv[0] == "-m" and len(argv) < 2):
        sys.stderr.write(USAGE + "\n")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    if argv[0] == "-m":  # as `python -m MODULE`: the working directory stays first
        enable()
        sys.argv = [argv[1]] + argv[2:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:  # as `python SCRIPT`: the script's directory replaces the working directory
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
        enable()
        sys.argv = list(argv)
        runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
