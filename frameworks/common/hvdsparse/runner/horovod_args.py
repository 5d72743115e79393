"""Horovod's programmatic launch: `horovod.runner._HorovodArgs`, a bag of horovodrun's settings
under their Python names, and `horovod.runner.launch._run(args)`, which runs it (Horovod's run()
goes through both, and so do its integration tests and tools built on Horovod). The settings
become horovodrun's flags for the `hvdsparse` launcher; a function (`run_func`) runs as
hvdsparse.run() runs it, a command (`command`) as `horovodrun` runs it."""
import warnings

# Settings that take a value: (attribute, horovodrun flag).
_VALUED = (
    ("num_proc", "-np"), ("hosts", "-H"), ("hostfile", "--hostfile"),
    ("host_discovery_script", "--host-discovery-script"), ("ssh_port", "-p"),
    ("ssh_identity_file", "-i"), ("start_timeout", "--start-timeout"),
    ("output_filename", "--output-filename"), ("config_file", "--config-file"),
    ("fusion_threshold_mb", "--fusion-threshold-mb"), ("cycle_time_ms", "--cycle-time-ms"),
    ("cache_capacity", "--cache-capacity"), ("autotune_log_file", "--autotune-log-file"),
    ("autotune_warmup_samples", "--autotune-warmup-samples"),
    ("autotune_steps_per_sample", "--autotune-steps-per-sample"),
    ("autotune_bayes_opt_max_samples", "--autotune-bayes-opt-max-samples"),
    ("autotune_gaussian_process_noise", "--autotune-gaussian-process-noise"),
    ("min_num_proc", "--min-np"), ("max_num_proc", "--max-np"), ("slots", "--slots-per-host"),
    ("elastic_timeout", "--elastic-timeout"), ("reset_limit", "--reset-limit"),
    ("timeline_filename", "--timeline-filename"),
    ("stall_check_warning_time_seconds", "--stall-check-warning-time-seconds"),
    ("stall_check_shutdown_time_seconds", "--stall-check-shutdown-time-seconds"),
    ("mpi_args", "--mpi-args"), ("binding_args", "--binding-args"),
    ("num_nccl_streams", "--num-nccl-streams"), ("thread_affinity", "--thread-affinity"),
    ("gloo_timeout_seconds", "--gloo-timeout-seconds"), ("log_level", "--log-level"))
# Switches: (attribute, flag when True, flag when False or None for none).
_SWITCHES = (
    ("disable_cache", "--disable-cache", None), ("verbose", "--verbose", None),
    ("hierarchical_allreduce", "--hierarchical-allreduce", "--no-hierarchical-allreduce"),
    ("hierarchical_allgather", "--hierarchical-allgather", None),
    ("autotune", "--autotune", None), ("timeline_mark_cycles", "--timeline-mark-cycles", None),
    ("no_stall_check", "--no-stall-check", None),
    ("mpi_threads_disable", "--mpi-threads-disable", None), ("tcp_flag", "--tcp", None),
    ("prefix_output_with_timestamp", "--prefix-output-with-timestamp", None),
    ("log_with_timestamp", None, "--log-without-timestamp"),
    ("use_mpi", "--mpi", None), ("use_jsrun", "--jsrun", None))
# Settings that apply to an elastic job only.
_ELASTIC_ONLY = ("max_num_proc", "slots", "elastic_timeout", "reset_limit", "cooldown_range")
# Settings with no flag of their own: the command or function, and what needs no flag here.
_OTHERS = ("check_build", "nic", "command", "run_func", "nics", "executable", "torus_allreduce",
           "cooldown_range", "use_gloo")


class HorovodArgs(object):
    """Horovod's `_HorovodArgs`: every setting None (num_proc 1) until the caller sets one."""

    def __init__(self):
        for name in [a for a, _ in _VALUED] + [a for a, _, _ in _SWITCHES] + list(_OTHERS):
            setattr(self, name, None)
        self.num_proc = 1


def _set(value):
    # Horovod's own _HorovodArgs makes cycle_time_ms and cache_capacity the tuple (None,).
    return value is not None and value != (None,)


def launch_flags(args):
    """horovodrun's flags for the settings in args."""
    if args.hosts and args.hostfile:
        raise ValueError("Argument hosts and hostfile only allow one provided.")
    if args.use_gloo and args.use_mpi:
        raise ValueError("Argument use_gloo and use_mpi only allow one set True.")
    if args.run_func is None and not args.command:
        raise ValueError("_run(args): set args.run_func (a function) or args.command (a list)")
    # Horovod's rule: a discovery script or a minimum makes the job elastic; a static job
    # leaves the elastic settings out (with a warning here).
    elastic = args.min_num_proc is not None or args.host_discovery_script is not None
    unused = [a for a in _ELASTIC_ONLY if _set(getattr(args, a, None))] if not elastic else []
    if unused:
        warnings.warn("%s: no effect in a job that is not elastic (set min_num_proc or "
                      "host_discovery_script)" % ", ".join(unused))
    flags = []
    for attr, flag in _VALUED:
        value = getattr(args, attr, None)
        if _set(value) and attr not in unused:
            flags += [flag, str(value)]
    for attr, on, off in _SWITCHES:
        value = getattr(args, attr, None)
        flag = on if value else off if value is False else None
        if flag:
            flags.append(flag)
    if args.cooldown_range and elastic:
        flags += ["--blacklist-cooldown-range"] + [str(v) for v in args.cooldown_range]
    # a list keeps its order (its first interface also serves rendezvous); Horovod's is a set
    nics = args.nic.split(",") if args.nic and not args.nics else args.nics
    nics = list(nics) if isinstance(nics, (list, tuple)) else sorted(nics) if nics else None
    if nics:
        flags += ["--network-interfaces", ",".join(nics)]
    if args.torus_allreduce:
        warnings.warn("torus_allreduce has no effect under hvdsparse (its hierarchy is chosen "
                      "from the hosts' layout)")
    return flags


def run_args(args):
    """Horovod's `launch._run(args)`: the function's values in rank order for args.run_func, or
    None once args.command finished on every worker; RuntimeError when the job failed."""
    from hvdsparse.runner import _all_local, _host_names, run_command_with_flags, \
        run_func_with_flags
    flags = launch_flags(args)
    if args.run_func is not None:
        local = args.host_discovery_script is None and \
            _all_local(_host_names(args.hosts, args.hostfile))
        return run_func_with_flags(args.run_func, flags, local, args.executable)
    return run_command_with_flags(args.command, flags)
