"""broadcast_object and allgather_object: Python objects travel as their cloudpickle bytes, by one
protocol in every binding. Each object takes two operations named after it (its type's name
unless given, as in Horovod): "<name>.sz" carries the byte counts (int64), "<name>.t" the bytes
(uint8). The binding lends its collectives on 1-D numpy arrays:
broadcast(array, root_rank, name, process_set) and allgather(array, name, process_set)."""
import cloudpickle
import numpy as np

from hvdsparse.common import basics


def _pickled(obj):
    """obj's bytes as a writable uint8 array (frameworks may write into what they are lent)."""
    return np.frombuffer(bytearray(cloudpickle.dumps(obj)), dtype=np.uint8)


def _unpickled(array):
    return cloudpickle.loads(array.tobytes())


def broadcast_object(obj, root_rank, name, process_set, broadcast):
    """root_rank's obj on every rank of the set; root_rank keeps its own object."""
    name = name or type(obj).__name__
    if basics.rank() == root_rank:
        data = _pickled(obj)
        broadcast(np.array([data.size], dtype=np.int64), root_rank, name + ".sz", process_set)
        broadcast(data, root_rank, name + ".t", process_set)
        return obj
    size = broadcast(np.zeros(1, dtype=np.int64), root_rank, name + ".sz", process_set)
    data = broadcast(np.zeros(int(size[0]), dtype=np.uint8), root_rank, name + ".t", process_set)
    return _unpickled(data)


def allgather_object(obj, name, process_set, allgather):
    """Every rank's obj, in the set's rank order."""
    name = name or type(obj).__name__
    data = _pickled(obj)
    sizes = allgather(np.array([data.size], dtype=np.int64), name + ".sz", process_set)
    gathered = allgather(data, name + ".t", process_set)
    out, offset = [], 0
    for n in sizes.tolist():
        out.append(_unpickled(gathered[offset:offset + n]))
        offset += n
    return out
