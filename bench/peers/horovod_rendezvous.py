#!/usr/bin/env python3
"""The HTTP rendezvous server that horovodrun runs for Horovod's gloo controller, started on its
own so that the ranks of torch_allreduce_bench.py --backend horovod can be started by hand (with
ip netns exec on namespace hosts). Serves until killed.

  horovod_rendezvous.py --hosts h0,h1,h2,h3 [--slots 1] --port-file FILE
Rank r runs on host r // slots; the ranks need HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT (an address of
this host they reach, the port written to FILE), HOROVOD_HOSTNAME (their host's name), and
HOROVOD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE/CROSS_RANK/CROSS_SIZE matching this plan."""
import argparse
import os
import signal
import threading

from horovod.runner.common.util.hosts import SlotInfo
from horovod.runner.http.http_server import RendezvousServer


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", required=True)
    p.add_argument("--slots", type=int, default=1)
    p.add_argument("--port-file", required=True)
    a = p.parse_args()
    hosts = a.hosts.split(",")
    size = len(hosts) * a.slots
    plan = [SlotInfo(hostname=h, rank=hi * a.slots + s, local_rank=s, cross_rank=hi, size=size,
                     local_size=a.slots, cross_size=len(hosts))
            for hi, h in enumerate(hosts) for s in range(a.slots)]
    server = RendezvousServer(verbose=0)
    port = server.start()
    server.init(plan)
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
    os.replace(tmp, a.port_file)  # readers never see a partial file
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait()
    server.stop()


if __name__ == "__main__":
    main()
