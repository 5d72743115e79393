"""horovod.runner.launch under the alias: _run(args) runs a _HorovodArgs (a function's values
in rank order, or None for a command), and run_commandline() is `horovodrun` with this
process's arguments (`python -m horovod.runner.launch -np 2 python train.py`)."""
import os
import sys

from hvdsparse.runner.horovod_args import run_args as _run

__all__ = ["_run", "run_commandline"]


def run_commandline():
    from hvdsparse._launcher import launcher_env
    from hvdsparse.runner import launcher_path
    launcher = launcher_path("horovodrun")
    os.execve(launcher, [launcher] + sys.argv[1:], launcher_env())


if __name__ == "__main__":
    run_commandline()
