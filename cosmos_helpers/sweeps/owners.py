"""Which process is working in a sweep folder, so that two sweeps never work in the same one.

Two guards, because a sweep can be started twice in two ways:

* from another process (a second terminal, another notebook): while a sweep plans and runs, it holds an OS lock
  on ``<out>/sweep.lock`` (:func:`holding`). The OS releases it when the process ends however it ends, so a lock
  is never left behind by a crash and never has to be guessed stale; the file also names its holder, for the
  refusal. Where the platform has no ``fcntl`` (Windows), only the second guard applies.
* from the same process (a Jupyter cell run again after Ctrl-C): a single-slot sweep runs its notebook in a
  thread, which Ctrl-C cannot stop, so the interrupted run may still be going. This process's runs in flight are
  kept in memory (:func:`in_flight`) and a run or a folder still in use here is refused like another sweep's.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import warnings
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Iterator

from ..errors import OutputExistsError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = "sweep.lock"
_HERE_LOCK = threading.Lock()
_HERE: dict[Path, int] = {}  # folders in use by this process (held sweep folders, runs in flight): how many uses


def this_process() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def in_use_here(folder: Path) -> bool:
    """Whether this process is working in ``folder``: a sweep holding it, or a run in flight in it or below it."""
    folder = Path(folder).resolve()
    with _HERE_LOCK:
        return any(path == folder or folder in path.parents for path in _HERE)


@contextmanager
def in_flight(folder: Path) -> Iterator[None]:
    """Mark ``folder`` in use by this process for as long as the block runs (a run, in whatever thread)."""
    folder = Path(folder).resolve()
    with _HERE_LOCK:
        _HERE[folder] = _HERE.get(folder, 0) + 1
    try:
        yield
    finally:
        with _HERE_LOCK:
            _HERE[folder] -= 1
            if not _HERE[folder]:
                del _HERE[folder]


def alive(owner: dict[str, Any], folder: Path) -> bool:
    """Whether the sweep process ``owner`` that marked ``folder``'s run ``running`` may still be at it: another
    host's is assumed to be; this process's is while the run is still in flight here."""
    if owner.get("host") != socket.gethostname():
        return True
    pid = owner.get("pid")
    if not isinstance(pid, int):
        return False
    if pid == os.getpid():
        return in_use_here(folder)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


@contextmanager
def holding(out: Path) -> Iterator[None]:
    """Hold the sweep folder ``out`` while a sweep plans and runs in it; refuse it when another sweep does."""
    out = Path(out).resolve()
    if in_use_here(out):
        raise OutputExistsError(f"{out} is still in use by a sweep in this process (one interrupted here may still "
                                "be finishing its run in the background); wait for it, restart the kernel, or use "
                                "another output folder.")
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    lock = out / LOCK_NAME
    with open(lock, "a+", encoding="utf-8") as handle:
        _lock(handle, lock)  # refused: the folder is the holder's, left as it is
        try:
            with in_flight(out):
                yield
        finally:
            if created:  # nothing ran in the folder this sweep made: leave no trace (still holding the lock)
                with suppress(OSError):
                    if [p.name for p in out.iterdir()] == [LOCK_NAME]:
                        lock.unlink()
                        out.rmdir()


def _lock(handle: Any, lock: Path) -> None:
    """Take the OS lock on the open ``lock`` file (released when it is closed, or the process ends) and write
    this process into it; refuse, naming the holder, when another process has it."""
    if fcntl is None:
        return
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        try:
            owner = json.loads(handle.read() or "{}")
        except json.JSONDecodeError:
            owner = {}
        raise OutputExistsError(f"{lock.parent} is in use by another sweep (pid {owner.get('pid')} on "
                                f"{owner.get('host')}, since {owner.get('started')}); wait for it to finish, or "
                                "use another output folder.") from None
    except OSError as error:  # a filesystem without locks (NFS without lockd, some FUSE mounts)
        warnings.warn(f"{lock.parent}: no lock can be taken here ({error.strerror}); a second sweep started into "
                      "this folder from another process would not be refused.", stacklevel=3)
        return
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps({**this_process(), "started": now()}))
    handle.flush()
