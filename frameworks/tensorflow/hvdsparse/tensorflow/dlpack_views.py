"""TensorFlow GPU tensors seen in place through DLPack, for the dense collectives (eager and
inside tf.function's py_function), so their bytes do not cross to host memory and back.

TensorFlow shows a tensor's memory (tf.experimental.dlpack.to_dlpack) but not the stream its
producer wrote it on, and writes into a tensor it made are not its API: so
- an input is the memory behind its DLPack capsule, read after hvds_device_synchronize (every
  stream of the GPU done);
- an output is a fresh tensor made by TensorFlow's Empty op (a broadcast's: its DeepCopy op of
  the input) on the input's device, memory no other tensor shares, written by the runtime
  through its capsule; outputs the runtime sizes (allgather, alltoall, reducescatter) are made
  by its allocation callback (Outputs);
- the result is returned once the GPU finished it (with completion at launch, after another
  synchronize), so TensorFlow's later reads on its own stream see it.
Without the device library, GPU tensors keep the host path (TensorFlow copies them).
`takes` decides; the tests set it to run these views over CPU tensors (control flow only)."""
import ctypes
import itertools

import tensorflow as tf

from hvdsparse.common import _lib, basics, handles

_KDL_CPU, _KDL_CUDA = 1, 2


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

_usable = []  # [the device library loads and this TensorFlow has DLPack], asked once


# What goes in place: dtypes both DLPack and TensorFlow's Empty op on a GPU take. int32 stays
# out: TensorFlow keeps int32 "GPU" tensors in host memory.
IN_PLACE_DTYPES = (tf.float16, tf.float32, tf.float64, tf.int64, tf.int8, tf.uint8)


def _on_gpu(x):
    return (isinstance(x, tf.Tensor) and hasattr(x, "numpy") and x.dtype in IN_PLACE_DTYPES
            and ":GPU:" in x.device.upper())


def takes(x):
    """True for an eager GPU tensor of IN_PLACE_DTYPES when the device library loads: it goes
    in place."""
    if not _on_gpu(x):
        return False
    if not _usable:
        _usable.append(basics.cuda_built() and hasattr(tf.experimental, "dlpack"))
    return _usable[0]


class View:
    """The memory of an eager tensor as the runtime's hvds_tensor_t (the capsule that keeps it
    alive goes with it): device -1 for host memory, the GPU's index for CUDA memory."""
    __slots__ = ("tensor", "capsule", "c", "device")

    def __init__(self, tensor, c_dtype):
        self.tensor = tensor
        self.capsule = tf.experimental.dlpack.to_dlpack(tensor)
        dl = _DLManagedTensor.from_address(_capsule_pointer(self.capsule, b"dltensor")).dl_tensor
        if dl.device.device_type not in (_KDL_CPU, _KDL_CUDA):
            raise ValueError("hvdsparse: tensor on %s: DLPack device type %d is neither the CPU "
                             "nor a CUDA GPU" % (tensor.device, dl.device.device_type))
        shape = [int(dl.shape[d]) for d in range(dl.ndim)]
        if dl.strides:
            expect = 1
            for d in reversed(range(dl.ndim)):
                if shape[d] > 1 and int(dl.strides[d]) != expect:
                    raise ValueError("hvdsparse: tensor on %s is not dense row-major"
                                     % tensor.device)
                expect *= shape[d]
        self.device = dl.device.device_id if dl.device.device_type == _KDL_CUDA else -1
        data = (dl.data or 0) + dl.byte_offset
        self.c = _lib.tensor_view(data if data else None, c_dtype, shape, self.device)


def empty_like(tensor):
    """A tensor of tensor's shape and dtype on its device, in memory of its own."""
    with tf.device(tensor.device):
        return tf.raw_ops.Empty(shape=tf.shape(tensor), dtype=tensor.dtype, init=False)


def copy(tensor):
    """A copy of tensor on its device in memory of its own (what a broadcast writes into)."""
    with tf.device(tensor.device):
        return tf.raw_ops.DeepCopy(x=tensor)


def synchronize(devices):
    """Waits for every stream of these GPUs (a set of device indices; -1 is skipped)."""
    for d in sorted(devices):
        if d >= 0:
            basics.check(_lib.lib().hvds_device_synchronize(d), "waiting for the GPU")


def settle(handle, device):
    """After completion: a result whose GPU work is still in flight (completion at launch) is
    waited for, as TensorFlow's stream cannot be made to wait."""
    if device >= 0 and _lib.lib().hvds_handle_gpu_work(handle) >= 0:
        synchronize({device})


# ---- outputs the runtime sizes: made from its allocation callback, on its own thread ---------
_outputs = {}  # key -> Outputs
_keys = itertools.count(1)


def _alloc_cb(ctx, c_dtype, ndim, shape, nbytes):
    try:
        outputs = _outputs.get(ctx)
        if outputs is None:
            return None
        dims = [shape[i] for i in range(ndim)]
        with tf.device(outputs.device):
            t = tf.raw_ops.Empty(shape=tf.constant(dims, tf.int32), dtype=outputs.dtype,
                                 init=False)
        if nbytes == 0 or t.shape.num_elements() == 0:
            return _lib.EMPTY
        data = View(t, c_dtype).c.data
        outputs.made[data] = t
        return data
    except Exception:  # a Python error must not cross into C: the operation fails instead
        return None


_ALLOC = _lib.ALLOC_FN(_alloc_cb)


class Outputs:
    """The outputs of one operation on the input's device and of its dtype: set as opts'
    allocator; take(handle, i) gives output i as a TensorFlow tensor; close() when done."""

    def __init__(self, opts, like):
        self.device, self.dtype, self.made = like.device, like.dtype, {}
        self.key = next(_keys)
        _outputs[self.key] = self
        opts.alloc = _ALLOC
        opts.alloc_ctx = self.key

    def take(self, handle, i):
        t = handles.output(handle, i)
        made = self.made.pop(t.data, None)
        if made is not None:
            return made
        with tf.device(self.device):  # an empty result: the callback kept nothing
            return tf.zeros([t.shape[d] for d in range(t.ndim)], self.dtype)

    def close(self):
        _outputs.pop(self.key, None)
