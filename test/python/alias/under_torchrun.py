"""Runs a script under `torchrun --standalone --nproc-per-node 2 -m hvdsparse.alias`.

torchrun picks a free MASTER_PORT and rank 0's store takes the next port, which another process
of this machine can hold by chance: the job then says "Address already in use", and one retry,
with a fresh port, is what a user would do. At the deadline the process group this started is
killed.

    python3 under_torchrun.py SCRIPT"""
import os
import signal
import subprocess
import sys


def main():
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "hvdsparse.alias", sys.argv[1]]
    for attempt in range(2):
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            print(out + "\nFAIL: no answer within 240 s")
            return 1
        if proc.returncode == 0 or "Address already in use" not in out:
            break
        print("attempt %d: the store's port was taken; retrying" % (attempt + 1))
    print(out)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
