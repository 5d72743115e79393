"""The compute job of the tf.data service (Horovod's horovod.tensorflow.data.compute_worker):

    hvdsparse run -np N python -m hvdsparse.tensorflow.data.compute_worker CONFIGFILE \
        [--dispatchers D] [--dispatcher-side compute|training] [--timeout SECONDS]

Rank 0 serves the compute service and writes CONFIGFILE for the training job; every rank runs a
tf.data worker until the training side calls the service's shutdown."""
import argparse
import secrets

from hvdsparse.runner.compute_service import ComputeService
from hvdsparse.tensorflow import functions, mpi_ops
from hvdsparse.tensorflow.data.compute_service import TfDataServiceConfig, compute_worker_fn


def main(dispatchers: int, dispatcher_side: str, configfile: str, timeout: int):
    mpi_ops.init()
    rank, size = mpi_ops.rank(), mpi_ops.size()
    if dispatchers < 1 or size % dispatchers:
        raise ValueError("Number of processes (%d) must be a multiple of number of dispatchers "
                         "(%d)." % (size, dispatchers))
    service = None
    try:
        config = None
        if rank == 0:
            key = secrets.token_bytes(32)
            service = ComputeService(dispatchers, size // dispatchers, key=key)
            config = TfDataServiceConfig(
                dispatchers=dispatchers, workers_per_dispatcher=size // dispatchers,
                dispatcher_side=dispatcher_side, addresses=service.addresses(), key=key,
                timeout=timeout)
            config.write(configfile)
        config = functions.broadcast_object(config, root_rank=0, name="TfDataServiceConfig")
        compute_worker_fn(config)
    finally:
        if service is not None:
            service.shutdown()


def _parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configfile", help="where rank 0 writes the service's config file")
    parser.add_argument("--dispatchers", type=int, default=1,
                        help="tf.data dispatchers (the job's size must be a multiple)")
    parser.add_argument("--dispatcher-side", default="compute", choices=("compute", "training"),
                        help="whether the dispatchers run in this job or in the training job")
    parser.add_argument("--timeout", type=int, default=60,
                        help="seconds to wait for dispatchers and workers to register")
    return parser.parse_args(argv)


if __name__ == "__main__":
    args = _parse()
    main(args.dispatchers, args.dispatcher_side, args.configfile, args.timeout)
