"""The Keras example's --horovod path (the script bench/horovod_compare.py runs under Horovod
itself): under `hvdsparse run --horovod-alias`, 2 ranks and 1 rank with the same global batch
end at the same loss, and the example reports its throughput. Exits non-zero otherwise.

    python3 keras_example_horovod.py HVDSPARSE_CLI"""
import os
import re
import signal
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EXAMPLE = os.path.join(ROOT, "frameworks", "tensorflow", "examples", "keras_synthetic_train.py")


def final_loss(cli, np_):
    cmd = [cli, "run", "--horovod-alias", "-np", str(np_), sys.executable, EXAMPLE, "--horovod",
           "--epochs", "2", "--samples", "1024", "--global-batch", "64"]
    env = dict(os.environ, TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1")
    # Its own process group, so a hang ends the launcher and its ranks, and nothing else.
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=env, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        sys.exit("np %d: no end after 240 s:\n%s" % (np_, out[-3000:]))
    loss = re.search(r"final loss \(full data\): ([\d.]+)", out)
    rate = re.search(r"samples/s: ([\d.]+) on (\d+) rank", out)
    if p.returncode != 0 or not loss or not rate or int(rate.group(2)) != np_:
        sys.exit("np %d: exit %d, no final loss or throughput:\n%s" % (np_, p.returncode, out[-3000:]))
    return float(loss.group(1))


def main():
    one, two = final_loss(sys.argv[1], 1), final_loss(sys.argv[1], 2)
    print("final loss: np 1 %.6f, np 2 %.6f" % (one, two))
    if abs(one - two) > 1e-4 * max(1.0, abs(one)):
        sys.exit("np 2 ended at %.6f, a single process at %.6f" % (two, one))


if __name__ == "__main__":
    main()
