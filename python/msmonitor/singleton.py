"""Singleton class decorator: X() always returns the same instance. The decorated class keeps
its identity (isinstance, classmethods through X.m and X().m all work)."""
import threading


def Singleton(cls):  # noqa: N802 (upstream name)
    lock = threading.Lock()
    holder = []

    def __new__(klass, *args, **kwargs):
        with lock:
            if not holder:
                holder.append(object.__new__(klass))
            return holder[0]

    cls.__new__ = __new__
    return cls
