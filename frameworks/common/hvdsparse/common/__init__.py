"""Framework-independent pieces: the ctypes loader, basics, process sets, exceptions, and all that
the PyTorch and TensorFlow bindings do alike (errors, handles, op and argument checks, the object
protocol, compression). Nothing here imports a framework."""
