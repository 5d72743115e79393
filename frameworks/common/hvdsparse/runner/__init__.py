"""hvdsparse.run() (horovod.run() under the alias): runs a Python function on every worker of a
job that the `hvdsparse` launcher starts, and returns what each rank's call returned, in rank
order. The function and its arguments travel pickled by cloudpickle from this process (the
driver) to the workers, the results back, over a connection signed with a secret made for the
job (channel.py). docs/launcher.md#from-python-run."""
import os
import secrets
import shutil
import socket
import subprocess
import sys
import warnings

_LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")


def launcher_path(name="hvdsparse"):
    """The native launcher `name` (hvdsparse or horovodrun) of the installed package, else the
    one on PATH (a build's bin/ folder)."""
    from hvdsparse._launcher import native_launcher
    native = native_launcher(name)
    if os.access(native, os.X_OK):
        return native
    found = shutil.which(name)
    if found is None:
        raise RuntimeError("hvdsparse.run(): the `%s` launcher is neither in the installed "
                           "package nor on PATH; pip install hvdsparse, or put a build's bin/ "
                           "folder on PATH" % name)
    return found


def _host_names(hosts, hostfile):
    if hosts:
        return [h.split(":")[0].strip() for h in hosts.split(",") if h.strip()]
    if hostfile:
        with open(hostfile) as f:
            lines = [line.split("#")[0].split() for line in f]
        return [words[0].split(":")[0] for words in lines if words]
    return ["localhost"]


def _all_local(names):
    own = {socket.gethostname(), socket.getfqdn()}
    return all(name in _LOCAL_NAMES or name in own for name in names)


def _deprecated(new_value, default, old_value, old, new):
    if old_value is None:
        return new_value
    warnings.warn("%s is deprecated, use %s instead" % (old, new), DeprecationWarning)
    return old_value if new_value == default else new_value


def _results(reports, returncode):
    """The values in rank order, or RuntimeError naming each rank that raised or sent nothing.
    An elastic job's ranks report the size they ended with; the latest report's size wins."""
    errors = [(rank, payload.decode(errors="replace")) for kind, rank, _, payload in reports
              if kind == b"E"]
    # Under the alias the message opens with Horovod's sentence, which its users match.
    horovod = ("Horovod detected that one or more processes exited with non-zero status, thus "
               "causing the job to be terminated. " if alias_loaded() else "")
    if errors:  # in order of arrival: the first is the cause, the others mostly its echo
        first, text = errors[0]
        later = sorted({rank for rank, _ in errors[1:]} - {first})
        raise RuntimeError(horovod + "hvdsparse.run(): the function raised on rank %d%s (launcher "
                           "exit status %d); rank %d's traceback:\n%s"
                           % (first, " first, then on rank(s) %s" % later if later else "",
                              returncode, first, text))
    values = [r for r in reports if r[0] == b"R"]
    size = values[-1][2] if values else 0
    by_rank = {rank: payload for _, rank, s, payload in values if s == size}
    missing = [r for r in range(size) if r not in by_rank]
    if returncode != 0 or not values or missing:
        raise RuntimeError((horovod if returncode != 0 else "") +
                           "hvdsparse.run(): the job ended with launcher exit status %d and %s"
                           % (returncode, "no rank sent a result" if not values else
                              "no result from rank(s) %s of %d" % (missing, size)
                              if missing else "every rank's result"))
    import cloudpickle
    return [cloudpickle.loads(by_rank[r]) for r in range(size)]


def run(func, args=(), kwargs=None, num_proc=1, min_num_proc=None, max_num_proc=None,
        slots=None, reset_limit=None, cooldown_range=None, hosts=None, hostfile=None,
        host_discovery_script=None, start_timeout=None, ssh_port=None, ssh_identity_file=None,
        disable_cache=None, output_filename=None, verbose=None, use_gloo=None, use_mpi=None,
        mpi_args=None, network_interface=None, network_interfaces=None, executable=None,
        np=None, min_np=None, max_np=None):
    """Runs func(*args, **kwargs) on num_proc workers and returns their return values, index i
    holding rank i's, as horovod.run() does. The arguments are horovodrun's flags (`hvdsparse run
    --help`). A rank that raises makes this raise RuntimeError with that rank's traceback; the
    launcher then ends the other ranks. When this process loaded the Horovod alias (`import
    horovod`), the workers get it too."""
    if network_interface:
        warnings.warn("network_interface is deprecated, use network_interfaces instead",
                      DeprecationWarning)
        network_interfaces = network_interface.split(",")
    num_proc = _deprecated(num_proc, 1, np, "np", "num_proc")
    min_num_proc = _deprecated(min_num_proc, None, min_np, "min_np", "min_num_proc")
    max_num_proc = _deprecated(max_num_proc, None, max_np, "max_np", "max_num_proc")
    kwargs = kwargs or {}
    # As Horovod's run(): its settings, launched by launch._run() (horovod_args.py).
    from hvdsparse.runner.horovod_args import HorovodArgs, run_args
    settings = HorovodArgs()
    vars(settings).update(
        num_proc=num_proc, min_num_proc=min_num_proc, max_num_proc=max_num_proc, slots=slots,
        reset_limit=reset_limit, cooldown_range=cooldown_range, hosts=hosts, hostfile=hostfile,
        host_discovery_script=host_discovery_script, start_timeout=start_timeout,
        ssh_port=ssh_port, ssh_identity_file=ssh_identity_file, disable_cache=disable_cache,
        output_filename=output_filename, verbose=verbose, use_gloo=use_gloo, use_mpi=use_mpi,
        mpi_args=mpi_args, executable=executable,
        nics=list(network_interfaces) if network_interfaces else None,
        run_func=lambda: func(*args, **kwargs))
    return run_args(settings)


def alias_loaded():
    """Whether this process imported the Horovod alias (`import horovod` loading hvdsparse)."""
    return getattr(sys.modules.get("horovod"), "HVDSPARSE_ALIAS", False)


def _wait(launcher):
    """The launcher's exit status; interrupted, it ends the launcher (which ends its workers on
    SIGTERM) before it raises."""
    try:
        return launcher.wait()
    except BaseException:
        launcher.terminate()
        try:
            launcher.wait(timeout=30)
        except subprocess.TimeoutExpired:
            launcher.kill()
            launcher.wait()
        raise


def run_command_with_flags(command, flags):
    """Runs `hvdsparse run FLAGS COMMAND` and returns None, or raises RuntimeError when the job
    failed (the launcher's output has already named the first worker that failed)."""
    from hvdsparse._launcher import launcher_env
    flags = flags + (["--horovod-alias"] if alias_loaded() else [])
    returncode = _wait(subprocess.Popen([launcher_path(), "run"] + flags + list(command),
                                        env=launcher_env()))
    if returncode != 0:
        raise RuntimeError("%s detected that one or more processes exited with non-zero status, "
                           "thus causing the job to be terminated (launcher exit status %d; its "
                           "output above names the first process to do so)"
                           % ("Horovod" if alias_loaded() else "hvdsparse", returncode))
    return None


def run_func_with_flags(call, flags, local, executable=None):
    """Runs call() on every worker of `hvdsparse run FLAGS` and returns the values in rank order
    (run()'s machinery; `local`: every host is this one, so the driver listens on loopback)."""
    import cloudpickle
    from hvdsparse._launcher import launcher_env
    from hvdsparse.runner.channel import DriverServer

    flags = flags + (["--horovod-alias"] if alias_loaded() else [])
    secret = secrets.token_bytes(32)
    server = DriverServer(cloudpickle.dumps(call), secret, "127.0.0.1" if local else "")
    env = launcher_env()
    env.update(HVDSPARSE_RUN_FUNC_PORT=str(server.port), HVDSPARSE_RUN_FUNC_SECRET=secret.hex())
    if local:  # else the workers reach this host where they reach the launcher's store
        env["HVDSPARSE_RUN_FUNC_ADDR"] = "127.0.0.1"
    command = [launcher_path(), "run"] + flags + [executable or sys.executable, "-m",
                                              "hvdsparse.runner.task"]
    try:
        returncode = _wait(subprocess.Popen(command, env=env))
    finally:
        server.close()
    return _results(server.reports, returncode)
