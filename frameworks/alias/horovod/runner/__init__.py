"""horovod.runner under the alias: run() is hvdsparse.run(), _HorovodArgs the settings that
launch._run() runs. util.threads and common.util.env hold the two helpers that Horovod's own
tests import from here."""
import hvdsparse.runner
from hvdsparse.runner.horovod_args import HorovodArgs as _HorovodArgs

__all__ = ["run", "_HorovodArgs"]

run = hvdsparse.runner.run
