"""Who this process is and whether another process on this machine is still alive.

A lease's holder (runtime/lease.py) and an ingest's in-flight mark (memory/inflight.py) both name the
process that holds them the same way (host, pid namespace, pid), so that a dead holder on this machine
is seen at once instead of after a TTL. Moved here from the lease so that ``memory`` (below
``runtime``) can ask it too.
"""

from __future__ import annotations

import os
import socket
import uuid
from typing import Protocol


class Held(Protocol):
    """What a lease or a mark says of its holder (``stores.records.LeaseState`` is one)."""

    @property
    def holder(self) -> str | None: ...

    @property
    def host(self) -> str | None: ...

    @property
    def pid_ns(self) -> str | None: ...

    @property
    def pid(self) -> int | None: ...


def holder_id(role: str = "worker") -> str:
    """Who holds the lease, as ops read it: what it is, where it runs, its pid (plus a nonce)."""
    return f"{role}@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None  # not Linux: never judge another process dead


def pid_namespace() -> str | None:
    """This process's pid namespace (None off Linux): with the host, where a holder's pid means something."""
    return _pid_namespace()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, someone else's
    return True


def _local_pid(state: Held | None, host: str, pid_ns: str | None) -> int | None:
    """The pid of a lease's holder when it is another process on ``host`` in pid namespace
    ``pid_ns`` (whose death this process can see); None otherwise."""
    if state is None or state.holder is None or pid_ns is None or state.pid is None:
        return None
    if state.host != host or state.pid_ns != pid_ns or state.pid == os.getpid():
        return None
    return state.pid


def local_pid(state: Held | None) -> int | None:
    """The pid of a lease's holder when it runs on this host, in this pid namespace (so its death
    can be seen at once, without waiting for the lease to expire); None otherwise."""
    return _local_pid(state, socket.gethostname(), _pid_namespace())
