"""The `hvdsparse` and `horovodrun` commands of a pip install: they run the native launchers
shipped inside this package (hvdsparse/bin/), telling them where the Horovod alias is and which
Python this is (HVDSPARSE_ALIAS_DIR, HVDSPARSE_PYTHON; docs/launcher.md)."""
import os
import sys


def _exec(name):
    native = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", name)
    if not os.access(native, os.X_OK):
        sys.stderr.write("hvdsparse: %s is missing; reinstall hvdsparse (pip install .)\n" % native)
        return 1
    env = dict(os.environ)
    try:
        from hvdsparse.alias import alias_dir
        env.setdefault("HVDSPARSE_ALIAS_DIR", alias_dir())
    except ImportError:
        pass  # the launcher says so if --horovod-alias asks for it
    env.setdefault("HVDSPARSE_PYTHON", sys.executable)
    os.execve(native, [name] + sys.argv[1:], env)
    return 1


def hvdsparse():
    return _exec("hvdsparse")


def horovodrun():
    return _exec("horovodrun")
