"""A rank that ends with an uncaught exception is named as the cause: its peers' pending
operations fail saying "Rank 1 stopped first, after an uncaught RuntimeError: ...", and so does
the launcher after its line about the first process to exit (which may be a peer).

    python3 uncaught_exception.py LAUNCHER
runs a 3-rank job under LAUNCHER in which rank 1 raises at step 5 of a training loop."""
import os
import subprocess
import sys
import tempfile

WORKER = r'''
import torch
import hvdsparse.torch as hvd
hvd.init()
model = torch.nn.Linear(100, 10)
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                               named_parameters=model.named_parameters())
for step in range(50):
    if step == 5 and hvd.rank() == 1:
        raise RuntimeError("user bug on rank 1")
    opt.zero_grad()
    model(torch.randn(4, 100)).sum().backward()
    opt.step()
print("rank %d finished all steps" % hvd.rank(), flush=True)
'''

CAUSE = "Rank 1 stopped first, after an uncaught RuntimeError: user bug on rank 1."


def main():
    launcher = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "worker.py")
        with open(script, "w") as f:
            f.write(WORKER)
        done = subprocess.run([launcher, "run", "-np", "3", sys.executable, script],
                              capture_output=True, text=True, timeout=120)
    out = done.stdout + done.stderr
    failures = []
    if done.returncode != 1:
        failures.append("launcher exit code %d, 1 expected" % done.returncode)
    if "finished all steps" in out:
        failures.append("a rank finished its steps although rank 1 stopped")
    if "RuntimeError: user bug on rank 1" not in out:
        failures.append("rank 1's traceback is missing")
    # Each peer that was waiting in an allreduce names rank 1 and its exception.
    peers = [line for line in out.splitlines()
             if line.startswith(("[0]", "[2]")) and "HorovodInternalError: " in line]
    if not peers:
        failures.append("no peer failed with HorovodInternalError")
    for line in peers:
        if CAUSE not in line:
            failures.append("a peer's error does not name the cause: " + line)
    tail = out.split("The first process to do so was:")[-1]
    if CAUSE not in tail:
        failures.append("the launcher does not name the cause after the first exit")
    if failures:
        print(out)
        print("\n".join("FAIL: " + f for f in failures))
        sys.exit(1)
    print("OK: %d peers and the launcher name rank 1's exception" % len(peers))


if __name__ == "__main__":
    main()
