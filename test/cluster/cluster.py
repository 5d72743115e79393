"""A namespace cluster (cluster.sh) from Python, for tests and benchmarks that run jobs on it:
one slot per host, named after this process so that several can coexist."""
import os
import subprocess

CLUSTER_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cluster.sh")


class Cluster:
    def __init__(self, hosts, rate="1gbit", tag="hc"):
        self.prefix = "%s%d-" % (tag, os.getpid())
        self.hosts = ["%sh%d" % (self.prefix, i) for i in range(hosts)]
        try:
            subprocess.run([CLUSTER_SH, "up", "--hosts", str(hosts), "--rate", rate,
                            "--prefix", self.prefix], check=True, capture_output=True, text=True)
        except subprocess.CalledProcessError as e:
            raise RuntimeError("cannot bring up a %d-host cluster: %s" % (hosts, e.stderr))

    def flags(self, hosts=None):
        """hvdsparse run's flags for the first `hosts` hosts (all by default)."""
        chosen = self.hosts[:hosts] if hosts else self.hosts
        return ["-H", ",".join(h + ":1" for h in chosen), "--rsh", "ip netns exec",
                "--network-interfaces", self.prefix + "net"]

    def discovery_flags(self):
        """The flags a job whose hosts come from a discovery script needs besides the script."""
        return ["--rsh", "ip netns exec", "--network-interfaces", self.prefix + "net"]

    def shape(self, host, loss):
        """Sets host's link loss ("100%" cuts it off, "0" restores it)."""
        subprocess.run([CLUSTER_SH, "shape", host, "--loss", loss, "--prefix", self.prefix],
                       check=True, capture_output=True)

    def down(self):
        subprocess.run([CLUSTER_SH, "down", "--prefix", self.prefix], capture_output=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.down()
