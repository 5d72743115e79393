"""hvdsparse.run() and horovod.run(): a function runs on every rank and its return values come
back in rank order; a rank that raises is named with its traceback while its peers, blocked in
an allreduce, are ended; an unpicklable result is named too; an elastic job that loses a rank
returns its survivors' values, and one whose hosts come from a discovery script returns every
rank's; Horovod's argument checks; the channel refuses a wrong secret both ways; under the alias
the workers import horovod.torch too, and Horovod's programmatic launch (`_HorovodArgs`,
`launch._run`) runs a function, a command, a failing one, and an elastic command that never
initialises hvdsparse on every slot.

    python3 run_func_test.py LAUNCHER ALIAS_DIR
A watchdog interrupts a run() that hangs, which then ends its launcher by pid."""
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import warnings

import hvdsparse
from hvdsparse.runner import channel

FAILURES = []


def check(ok, what):
    print(("PASS: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        FAILURES.append(what)


def train(magic, scale=1):
    import torch
    import hvdsparse.torch as hvd
    hvd.init()
    total = hvd.allreduce(torch.tensor([float(hvd.rank())]), op=hvd.Sum, name="ranks")
    return hvd.rank(), hvd.size(), magic * scale, total.item()


def rank1_raises():
    import torch
    import hvdsparse.torch as hvd
    hvd.init()
    if hvd.rank() == 1:
        raise ValueError("rank 1 says no")
    hvd.allreduce(torch.ones(4), name="never_completes")
    return "finished"


def rank0_returns_a_lock():
    import os
    import threading
    return threading.Lock() if os.environ.get("HVDSPARSE_RANK") == "0" else "fine"


def elastic_train():
    import os
    import signal
    import torch
    import hvdsparse.torch as hvd
    hvd.init()
    model = torch.nn.Linear(4, 1)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                   named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, opt, step=0)

    @hvd.elastic.run
    def train(state):
        while state.step < 20:
            if state.step == 5 and hvd.size() == 3 and hvd.rank() == 2:
                os.kill(os.getpid(), signal.SIGKILL)
            opt.zero_grad()
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
            state.step += 1
            state.commit()

    train(state)
    return hvd.rank(), hvd.size(), state.step


def alias_worker():
    import horovod.torch as hvd
    from horovod.runner.common.util.env import get_env_rank_and_size
    hvd.init()
    return hvd.rank(), hvd.__name__, get_env_rank_and_size()


def expect_runtime_error(call, *texts):
    try:
        call()
    except RuntimeError as e:
        message = str(e)
        missing = [t for t in texts if t not in message]
        return not missing, message if missing else ""
    return False, "no RuntimeError"


def test_results_in_rank_order():
    results = hvdsparse.run(train, args=(7,), kwargs={"scale": 2}, num_proc=3)
    check(results == [(r, 3, 14, 3.0) for r in range(3)],
          "run(num_proc=3) returns each rank's value in rank order: %r" % (results,))


def test_a_rank_that_raises():
    start = time.monotonic()
    ok, why = expect_runtime_error(lambda: hvdsparse.run(rank1_raises, num_proc=3),
                                   "raised on rank 1 first", "ValueError: rank 1 says no")
    check(ok, "rank 1's exception is raised by run(), naming the rank " + why)
    check(time.monotonic() - start < 90, "the peers blocked in an allreduce were ended")


def test_unpicklable_result():
    ok, why = expect_runtime_error(lambda: hvdsparse.run(rank0_returns_a_lock, num_proc=2),
                                   "raised on rank 0 (", "pickle")
    check(ok, "an unpicklable result is named with its rank " + why)


def test_elastic():
    # rank 2 alone on a second host name: its failure takes its host out of the job (Horovod's)
    results = hvdsparse.run(elastic_train, num_proc=3, min_num_proc=2,
                            hosts="localhost:2,127.0.0.1:1")
    check(results == [(0, 2, 20), (1, 2, 20)],
          "run(num_proc=3, min_num_proc=2) with rank 2 killed: the two that finished, at their "
          "final ranks: %r" % (results,))


def test_discovery_script():
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "discover.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\necho localhost:2\n")
        os.chmod(script, 0o755)
        results = hvdsparse.run(train, args=(3,), num_proc=2, min_num_proc=2,
                                host_discovery_script=script, network_interfaces=["lo"])
    check(results == [(r, 2, 3, 1.0) for r in range(2)],
          "run(host_discovery_script=..., network_interfaces=['lo']): %r" % (results,))


def test_argument_checks():
    for kwargs, text in (({"hosts": "localhost:2", "hostfile": "/nonexistent"}, "hostfile"),
                         ({"use_gloo": True, "use_mpi": True}, "use_mpi")):
        try:
            hvdsparse.run(train, args=(1,), num_proc=2, **kwargs)
            check(False, "run(%s) raised nothing" % kwargs)
        except ValueError as e:
            check(text in str(e), "run(%s) raises ValueError: %s" % (kwargs, e))


def forged_driver(port_out):
    """Answers one request with a reply signed under another secret."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port_out.append(listener.getsockname()[1])
    conn, _ = listener.accept()
    with conn, listener:
        nonce = os.urandom(channel.NONCE_BYTES)
        conn.sendall(nonce)
        channel._receive(conn, b"right", nonce, b"q")
        channel._send(conn, b"wrong", nonce, b"r", b"not the function")


def test_channel_secrets():
    server = channel.DriverServer(b"the function", b"right", "127.0.0.1")
    try:
        address = ("127.0.0.1", server.port)
        got = channel.request(address, b"right", channel.FETCH, 0, 1)
        check(got == b"the function", "the right secret fetches the function")
        try:
            channel.request(address, b"wrong", channel.RESULT, 0, 1, b"forged")
            check(False, "a request under a wrong secret was answered")
        except channel.ChannelError as e:
            check(True, "a request under a wrong secret is refused: %s" % e)
        check(server.reports == [], "nothing from a wrong secret is kept")
    finally:
        server.close()
    port = []
    thread = threading.Thread(target=forged_driver, args=(port,))
    thread.start()
    while not port:
        time.sleep(0.01)
    try:
        channel.request(("127.0.0.1", port[0]), b"right", channel.FETCH, 0, 1)
        check(False, "a worker accepted a reply under a wrong secret")
    except channel.ChannelError as e:
        check("secret" in str(e), "a worker refuses a reply under a wrong secret: %s" % e)
    thread.join()


def test_horovod_alias(alias_dir):
    sys.path.insert(0, alias_dir)
    import horovod
    import horovod.runner
    check(horovod.run is hvdsparse.run and horovod.runner.run is hvdsparse.run,
          "horovod.run and horovod.runner.run are hvdsparse.run")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = horovod.run(alias_worker, np=2)
    check(results == [(r, "hvdsparse.torch", (r, 2)) for r in range(2)],
          "horovod.run(np=2): the workers' `import horovod.torch` loads hvdsparse: %r"
          % (results,))
    check(any(issubclass(w.category, DeprecationWarning) and "np is deprecated" in str(w.message)
              for w in caught), "np= warns that it is deprecated, as in Horovod")


def test_horovod_launch(alias_dir):
    """horovod.runner._HorovodArgs and horovod.runner.launch._run, as Horovod's run() and its
    integration tests drive them."""
    sys.path.insert(0, alias_dir)
    import horovod.runner
    from horovod.runner.launch import _run
    from hvdsparse.runner.horovod_args import launch_flags
    args = horovod.runner._HorovodArgs()
    check(args.num_proc == 1 and args.hosts is None and args.run_func is None,
          "_HorovodArgs starts with Horovod's defaults")
    args.num_proc, args.hierarchical_allreduce, args.log_with_timestamp = 2, False, False
    args.nics, args.cooldown_range, args.command = {"lo"}, (1, 3), ["true"]
    args.cycle_time_ms = (None,)  # as Horovod's own _HorovodArgs leaves it
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        flags = launch_flags(args)
    check(flags == ["-np", "2", "--no-hierarchical-allreduce", "--log-without-timestamp",
                    "--network-interfaces", "lo"] and
          any("cooldown_range: no effect" in str(w.message) for w in caught),
          "_HorovodArgs' settings become horovodrun's flags, a static job's elastic ones left "
          "out with a warning: %s" % flags)
    args.min_num_proc = 2
    flags = launch_flags(args)
    check(flags[:4] == ["-np", "2", "--min-np", "2"] and
          flags[-5:] == ["--blacklist-cooldown-range", "1", "3", "--network-interfaces", "lo"],
          "an elastic job's settings become horovodrun's flags: %s" % flags)
    args.min_num_proc = None
    check(_run(args) is None, "_run(args) with a command that succeeds returns None")
    args = horovod.runner._HorovodArgs()
    args.num_proc, args.run_func = 2, alias_worker
    results = _run(args)
    check(results == [(r, "hvdsparse.torch", (r, 2)) for r in range(2)],
          "_run(args) with run_func returns each rank's value: %r" % (results,))
    args.run_func, args.command = None, ["false"]
    ok, why = expect_runtime_error(lambda: _run(args), "Horovod detected that one or more "
                                   "processes exited with non-zero status")
    check(ok, "_run(args) with a failing command raises Horovod's RuntimeError " + why)
    ok, why = expect_runtime_error(lambda: horovod.run(rank1_raises, num_proc=2),
                                   "Horovod detected that one or more processes exited",
                                   "raised on rank 1")
    check(ok, "under the alias run()'s error opens with Horovod's sentence " + why)
    with tempfile.TemporaryDirectory() as tmp:
        # elastic, two host names, four slots: each worker writes a file a second after start
        args = horovod.runner._HorovodArgs()
        args.num_proc, args.min_num_proc, args.hosts = 2, 2, "localhost:2,127.0.0.1:2"
        args.command = [sys.executable, "-c", "import os, time; time.sleep(1); open(os.path."
                        "join(%r, os.environ['HOROVOD_RANK']), 'w').close()" % tmp]
        check(_run(args) is None and sorted(os.listdir(tmp)) == ["0", "1", "2", "3"],
              "an elastic command that never initialises runs to its end on all 4 slots: %s"
              % sorted(os.listdir(tmp)))


def on_watchdog(signum, frame):
    raise TimeoutError("run() did not return within the watchdog's limit")


def main():
    launcher, alias_dir = sys.argv[1], sys.argv[2]
    os.environ["PATH"] = os.path.dirname(os.path.abspath(launcher)) + os.pathsep \
        + os.environ.get("PATH", "")
    signal.signal(signal.SIGALRM, on_watchdog)
    for test in (test_channel_secrets, test_argument_checks, test_results_in_rank_order,
                 test_a_rank_that_raises, test_unpicklable_result, test_elastic,
                 test_discovery_script, lambda: test_horovod_alias(alias_dir),
                 lambda: test_horovod_launch(alias_dir)):
        signal.alarm(120)
        try:
            test()
        except Exception as e:  # one case's failure is reported and the others still run
            check(False, "%s: %s: %s" % (getattr(test, "__name__", "alias"), type(e).__name__, e))
        signal.alarm(0)
    print("%d failure(s)" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
