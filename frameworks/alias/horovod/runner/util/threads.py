"""in_thread, as Horovod's tests use it (test/utils/common.py): runs target(*args) on a started
thread and returns the thread; with silent, an exception in target ends the thread quietly."""
import threading


def in_thread(target, args=(), name=None, daemon=True, silent=False):
    def call(*call_args):
        try:
            target(*call_args)
        except Exception:
            if not silent:
                raise

    thread = threading.Thread(target=call, args=args, name=name, daemon=daemon)
    thread.start()
    return thread
