"""get_env_rank_and_size, as Horovod's process-set tests use it: the rank and size a launcher
put in the environment (horovodrun's, Open MPI's or PMI's names, in that order), else 0 and 1."""
import os

_NAMES = (("HOROVOD_RANK", "HOROVOD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
          ("PMI_RANK", "PMI_SIZE"))


def get_env_rank_and_size():
    for rank_name, size_name in _NAMES:
        rank, size = os.environ.get(rank_name), os.environ.get(size_name)
        if rank is not None and size is not None:
            return int(rank), int(size)
        if rank is not None or size is not None:
            raise RuntimeError("Could not determine process rank and size: only one of %s and "
                               "%s found in environment" % (rank_name, size_name))
    return 0, 1
