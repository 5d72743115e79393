"""The `hvdsparse` and `horovodrun` commands of a pip install: they run the native launchers
shipped inside this package (hvdsparse/bin/), telling them where the Horovod alias is and which
Python this is (HVDSPARSE_ALIAS_DIR, HVDSPARSE_PYTHON; docs/launcher.md)."""
import os
import sys


def native_launcher(name):
    """The path of the native launcher `name` shipped in this package (absent in a source tree)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", name)


def launcher_env():
    """The environment the native launchers expect from a pip install: where the alias is and
    which Python this is (each kept when already set)."""
    env = dict(os.environ)
    try:
        from hvdsparse.alias import alias_dir
        env.setdefault("HVDSPARSE_ALIAS_DIR", alias_dir())
    except ImportError:
        pass  # the launcher says so if --horovod-alias asks for it
    env.setdefault("HVDSPARSE_PYTHON", sys.executable)
    return env


def _exec(name):
    native = native_launcher(name)
    if not os.access(native, os.X_OK):
        sys.stderr.write("hvdsparse: %s is missing; reinstall hvdsparse (pip install .)\n" % native)
        return 1
    os.execve(native, [name] + sys.argv[1:], launcher_env())
    return 1


def hvdsparse():
    return _exec("hvdsparse")


def horovodrun():
    return _exec("horovodrun")
