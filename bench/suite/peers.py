"""The command lines that run one implementation's float32 sum allreduce sweep on one place (this
host's loopback, or the hosts of a namespace cluster). Each returns (commands, environments):
one command for a launcher that starts every rank, or one per rank, each printing the same CSV
rows (only the first command's stdout is read, so rank 0 comes first)."""
import os
import shutil
import socket
import subprocess
import sys
import time

from common import kill_group

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TORCH_BENCH = os.path.join(ROOT, "bench", "peers", "torch_allreduce_bench.py")
HOROVOD_RDV = os.path.join(ROOT, "bench", "peers", "horovod_rendezvous.py")
RSH_AGENT = os.path.join(HERE, "netns_rsh.sh")

IMPLS = ["hvdsparse", "gloo", "mpi-tcp", "mpi-default", "torch-gloo", "horovod"]
# hvdsparse with one setting forced: an allreduce algorithm, or TCP where the default would take
# shared memory (every rank on one host). Not run unless asked for (--impls), and not peers.
VARIANTS = {"hvdsparse-ring": {"HVDSPARSE_ALLREDUCE_ALGORITHM": "ring"},
            "hvdsparse-rhd": {"HVDSPARSE_ALLREDUCE_ALGORITHM": "rhd"},
            "hvdsparse-tcp": {"HVDSPARSE_SHM": "0"}}
# Variants whose ratios to the peers the tables give too.
RATIO_VARIANTS = ["hvdsparse-tcp"]
ORDER = IMPLS[:1] + list(VARIANTS) + IMPLS[1:]
LABELS = {"hvdsparse": "hvdsparse", "hvdsparse-ring": "hvdsparse (ring forced)",
          "hvdsparse-rhd": "hvdsparse (rhd forced)", "hvdsparse-tcp": "hvdsparse (TCP forced)",
          "gloo": "Gloo allreduce", "mpi-tcp": "Open MPI TCP",
          "mpi-default": "Open MPI default (shm)", "torch-gloo": "torch.distributed gloo",
          "horovod": "Horovod (gloo)"}
# Open MPI's shared memory: one host only.
LOOPBACK_ONLY = {"mpi-default"}


def host_ifaces():
    """This host's interfaces for Open MPI's TCP on one host: not loopback (Open MPI leaves it
    out anyway) and not the bridges of namespace clusters (198.18.0.0/15), which other jobs bring
    up and take down while a run is under way (a vanished address fails the connect)."""
    p = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True)
    names = []
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) > 3 and not f[3].startswith(("127.", "198.18.", "198.19.")) and f[1] not in names:
            names.append(f[1])
    return names


class Loopback:
    """np ranks on this host, talking TCP over 127.0.0.1 (Open MPI: the host's own address)."""

    def __init__(self, np):
        self.np, self.name = np, f"loopback np {np}"

    def rank_cmd(self, r, cmd, env=None):
        e = dict(os.environ)
        e.update(env or {})
        return cmd, e

    def master_addr(self):
        return "127.0.0.1"


class OnCluster:
    """One rank per host of a bench.suite.cluster.Cluster."""

    def __init__(self, cluster, label):
        self.cluster, self.np, self.name = cluster, cluster.nhosts, label

    def rank_cmd(self, r, cmd, env=None):
        return self.cluster.netns(r, cmd, env), None

    def master_addr(self):
        return self.cluster.addrs[0]


def free_port():
    with socket.socket() as s:  # on loopback; namespaces are fresh, so free there too
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def available(impl, args):
    """None when impl can run here, else why not."""
    b = os.path.join(args.build, "bin")
    need = {"hvdsparse": os.path.join(b, "hvdsparse-perf"),
            "hvdsparse-ring": os.path.join(b, "hvdsparse-perf"),
            "hvdsparse-rhd": os.path.join(b, "hvdsparse-perf"),
            "hvdsparse-tcp": os.path.join(b, "hvdsparse-perf"),
            "gloo": os.path.join(b, "gloo_allreduce_bench"),
            "mpi-tcp": os.path.join(b, "mpi_allreduce_bench"),
            "mpi-default": os.path.join(b, "mpi_allreduce_bench")}
    if impl in need and not os.access(need[impl], os.X_OK):
        return f"{need[impl]} not built"
    if impl.startswith("mpi") and shutil.which("mpirun") is None:
        return "mpirun not found"
    if impl == "torch-gloo" and _py_import(sys.executable, "torch.distributed"):
        return "torch not importable"
    if impl == "horovod":
        if not args.horovod_python:
            return "no Python with Horovod given (--horovod-python)"
        err = _py_import(args.horovod_python, "horovod.torch")
        if err:
            return f"{args.horovod_python}: import horovod.torch failed: {err}"
    return None


def _py_import(python, module):
    p = subprocess.run([python, "-c", f"import {module}"], capture_output=True, text=True)
    return p.stderr.strip().splitlines()[-1] if p.returncode else None


def commands(impl, place, sweep, args, scratch):
    """(cmds, envs) for impl over sweep = (first, last, factor); scratch is an empty directory
    every host sees (the namespaces share the filesystem)."""
    lo, hi, f = sweep
    common = ["-b", str(lo), "-e", str(hi), "-f", str(f), "-n", str(args.iters),
              "-w", str(args.warmup), "-c", "1", "--csv", "--label", impl]
    b = os.path.join(args.build, "bin")
    cl = getattr(place, "cluster", None)
    if impl == "hvdsparse" or impl in VARIANTS:
        cmd = [os.path.join(b, "hvdsparse"), "run", "-np", str(place.np)]
        cmd += cl.launcher_flags() if cl else []
        cmd += [os.path.join(b, "hvdsparse-perf"), "allreduce", "-d", "float32", "-o", "sum"]
        env = dict(os.environ)  # the launcher forwards HVDSPARSE_* to every host
        env.update(VARIANTS.get(impl, {}))
        return [cmd + common], [env]
    if impl == "gloo":
        where = ["--iface", cl.iface] if cl else ["--host", "127.0.0.1"]
        runs = [place.rank_cmd(r, [os.path.join(b, "gloo_allreduce_bench"), "--rank", str(r),
                                   "--size", str(place.np), "--store", scratch, "--algorithm",
                                   args.gloo_algorithm] + where + common)
                for r in range(place.np)]
        return [c for c, _ in runs], [e for _, e in runs]
    if impl in ("mpi-tcp", "mpi-default"):
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(place.np)]
        if cl:
            cmd += ["-H", ",".join(cl.hosts), "--mca", "plm_rsh_agent", RSH_AGENT,
                    "--mca", "plm_rsh_no_tree_spawn", "1", "--mca", "btl_tcp_if_include",
                    cl.iface, "--mca", "oob_tcp_if_include", cl.iface]
        elif host_ifaces():
            names = ",".join(host_ifaces())
            cmd += ["--mca", "btl_tcp_if_include", names, "--mca", "oob_tcp_if_include", names]
        if impl == "mpi-tcp":
            cmd += ["--mca", "btl", "tcp,self"]
        return [cmd + [os.path.join(b, "mpi_allreduce_bench")] + common], [None]
    if impl in ("torch-gloo", "horovod"):
        return _python_ranks(impl, place, common, args, scratch)
    raise ValueError(impl)


def _python_ranks(impl, place, common, args, scratch):
    cl = getattr(place, "cluster", None)
    iface = cl.iface if cl else "lo"
    env = {"WORLD_SIZE": str(place.np), "OMP_NUM_THREADS": "1"}
    if impl == "torch-gloo":
        python, backend = sys.executable, "torch"
        env.update(MASTER_ADDR=place.master_addr(), MASTER_PORT=str(free_port()),
                   GLOO_SOCKET_IFNAME=iface)
    else:
        python, backend = args.horovod_python, "horovod"
        env.update(horovod_env(place, iface, scratch))
    cmds, envs = [], []
    for r in range(place.np):
        e = dict(env, RANK=str(r))
        if impl == "horovod":
            e.update(HOROVOD_RANK=str(r), HOROVOD_CROSS_RANK=str(r if cl else 0),
                     HOROVOD_LOCAL_RANK=str(0 if cl else r),
                     HOROVOD_HOSTNAME=cl.hosts[r] if cl else "localhost")
        cmd = [python, TORCH_BENCH, "--backend", backend] + common
        if impl == "horovod" and cl:
            cmd = as_named_host(cl.addrs[r], cmd)
        c, pe = place.rank_cmd(r, cmd, e)
        cmds.append(c)
        envs.append(pe)
    return cmds, envs


def as_named_host(addr, cmd):
    """cmd in its own UTS namespace whose host name is addr. Horovod 0.28.1's process-set Gloo
    contexts (the global set's included) ignore HOROVOD_GLOO_IFACE and bind to the address the
    host name resolves to; the namespace hosts share this machine's name, which resolves to
    loopback, so they would connect to 127.0.0.1. On a real cluster each host's name resolves to
    its own address, as here."""
    return ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', addr] + cmd


def horovod_env(place, iface, scratch):
    """Horovod's gloo controller without horovodrun: start_horovod_rendezvous() runs the
    rendezvous server horovodrun would, on an address every rank reaches, its port in
    scratch/port. Per rank the caller adds HOROVOD_RANK, LOCAL_RANK, CROSS_RANK, HOSTNAME."""
    cl = getattr(place, "cluster", None)
    n = place.np
    return {"HOROVOD_CONTROLLER": "gloo", "HOROVOD_CPU_OPERATIONS": "gloo",
            "HOROVOD_GLOO_IFACE": iface,
            "HOROVOD_GLOO_RENDEZVOUS_ADDR": cl.bridge if cl else "127.0.0.1",
            "HOROVOD_GLOO_RENDEZVOUS_PORT": open(os.path.join(scratch, "port")).read().strip(),
            "HOROVOD_SIZE": str(n), "HOROVOD_LOCAL_SIZE": str(1 if cl else n),
            "HOROVOD_CROSS_SIZE": str(n if cl else 1)}


def start_horovod_rendezvous(place, args, scratch, timeout=60):
    """Starts bench/peers/horovod_rendezvous.py for place's ranks; returns the process."""
    cl = getattr(place, "cluster", None)
    hosts = cl.hosts if cl else ["localhost"]
    slots = 1 if cl else place.np
    port_file = os.path.join(scratch, "port")
    proc = subprocess.Popen([args.horovod_python, HOROVOD_RDV, "--hosts", ",".join(hosts),
                             "--slots", str(slots), "--port-file", port_file],
                            start_new_session=True, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while not os.path.exists(port_file):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            raise RuntimeError("the Horovod rendezvous server did not start")
        time.sleep(0.1)
    return proc


def stop(proc):
    kill_group(proc)
