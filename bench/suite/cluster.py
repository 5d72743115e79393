"""The shaped namespace cluster for the suite: test/cluster/cluster.sh up on entry, down on every
way out (normal exit, exception, SIGINT, SIGTERM), with the hosts' names and addresses."""
import os
import re
import signal
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLUSTER_SH = os.path.join(ROOT, "test", "cluster", "cluster.sh")


class ClusterError(RuntimeError):
    pass


def _raise_exit(signum, _frame):
    raise SystemExit(128 + signum)  # unwinds through Cluster.__exit__, which tears down


class Cluster:
    """with Cluster(4, "1gbit", "bnx-") as c: c.hosts, c.addrs, c.iface, c.bridge, c.netns(...)"""

    def __init__(self, hosts, rate, prefix, log=None):
        self.nhosts, self.rate, self.prefix, self.log = hosts, rate, prefix, log
        self.hosts, self.addrs, self.bridge = [], [], None
        self.iface = prefix + "net"

    def _sh(self, *args):
        cmd = [CLUSTER_SH] + list(args) + ["--prefix", self.prefix]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if self.log:
            self.log.write("$ " + " ".join(cmd) + "\n" + p.stdout + p.stderr)
        if p.returncode != 0:
            raise ClusterError(f"{' '.join(cmd)}: {(p.stderr or p.stdout).strip()}")
        return p.stdout

    def down(self):
        try:
            self._sh("down")
        except ClusterError as e:
            print(f"warning: {e}", file=sys.stderr)

    def __enter__(self):
        self._old = {s: signal.signal(s, _raise_exit) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.down()  # a cluster left by a killed run has the same prefix
            out = self._sh("up", "--hosts", str(self.nhosts), "--rate", self.rate)
            for line in out.splitlines():
                m = re.match(r"bridge \S+ (\d+\.\d+\.\d+\.\d+)", line)
                if m:
                    self.bridge = m.group(1)
                m = re.match(r"(\S+h\d+) (\d+\.\d+\.\d+\.\d+)/\d+ ", line)
                if m:
                    self.hosts.append(m.group(1))
                    self.addrs.append(m.group(2))
            if len(self.hosts) != self.nhosts or not self.bridge:
                raise ClusterError(f"unexpected status output:\n{out}")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        self.down()
        for s, h in self._old.items():
            signal.signal(s, h)
        return False

    def netns(self, i, cmd, env=None):
        """cmd run on host i (inside its namespace), with env given as VAR=value arguments."""
        pre = ["ip", "netns", "exec", self.hosts[i]]
        if env:
            pre += ["env"] + [f"{k}={v}" for k, v in env.items()]
        return pre + cmd

    def launcher_flags(self, slots=1):
        return ["-H", ",".join(f"{h}:{slots}" for h in self.hosts), "--rsh", "ip netns exec",
                "--network-interfaces", self.iface]
