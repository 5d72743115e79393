"""Framework-independent pieces: the ctypes loader, basics, process sets, exceptions."""
