"""A sweep run's folder and manifest (``sweep-run.json``, written when it starts and ends), the resume rules
(:func:`plan`), and who is working where: an OS lock on ``<out>/sweep.lock`` refuses another process (:func:`holding`;
without ``fcntl`` only the second guard applies), and this process's record of runs in flight (:func:`in_flight`)
refuses itself: a single-slot sweep runs in a thread Ctrl-C cannot stop, so a cell rerun may find it still going.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import threading
import time
import warnings
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .. import media
from ..errors import OutputExistsError
from ..result import read_manifest
from .grid import canonical

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

SCHEMA = "cosmos-helpers/sweep-run/v1"
MANIFEST_NAME = "sweep-run.json"
OUTPUTS = "outputs"
ATTEMPTS = ".attempts"
LOCK_NAME = "sweep.lock"
_HERE_LOCK = threading.Lock()
_HERE: dict[Path, int] = {}  # folders in use by this process (held sweep folders, runs in flight): how many uses


@dataclass
class SweepRun:
    """One parameter set of a sweep and what became of it."""

    name: str
    parameters: dict[str, Any]
    folder: Path
    notebook: str = ""
    code: str = ""                   # digest of the notebook's code cells (code_digest)
    status: str = "pending"          # pending | running | ok | failed
    seconds: float | None = None
    error: str | None = None
    worker: dict[str, Any] = field(default_factory=dict)
    attempt: int = 1
    started: str | None = None
    finished: str | None = None
    reused: bool = False             # finished by an earlier invocation of the sweep, skipped this time
    owner: dict[str, Any] = field(default_factory=dict)  # the sweep process running it: host and pid

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def manifest_path(self) -> Path:
        return self.folder / MANIFEST_NAME

    @property
    def executed(self) -> Path:
        return self.folder / Path(self.notebook).name

    @property
    def outputs(self) -> Path:
        return self.folder / OUTPUTS

    def write_manifest(self) -> Path:
        data = {key: value for key, value in asdict(self).items() if key not in ("folder", "reused")}
        text = json.dumps({"schema": SCHEMA, **data, "executed": self.executed.name}, indent=2, default=str)
        return media.write_bytes_atomic(self.manifest_path, text.encode("utf-8"), overwrite=True)


def code_digest(notebook: str | Path) -> str:
    """A digest of the notebook's code cells (prose and outputs aside): what a finished run's results depend on
    besides its parameters, so an edited notebook's earlier runs are not taken for its own."""
    cells = json.loads(Path(notebook).read_text(encoding="utf-8")).get("cells", [])
    code = ["".join(c.get("source", "")) for c in cells if c.get("cell_type") == "code"]
    return hashlib.sha256(json.dumps(code).encode()).hexdigest()[:16]


def read_run_manifest(folder: Path) -> dict[str, Any] | None:
    data = read_manifest(folder / MANIFEST_NAME)
    return data if isinstance(data, dict) and data.get("schema") == SCHEMA else None


def plan(runs: list[SweepRun]) -> list[SweepRun]:
    """Mark finished runs as reused and return the ones to execute (a failed or interrupted one's folder moved into
    ``.attempts/`` first); refuse a folder of another notebook, its older code or other parameters, one without a
    manifest, or one a live sweep is running. Checks every run before it changes anything."""
    todo: list[tuple[SweepRun, dict[str, Any] | None]] = []
    for run in runs:
        manifest = read_run_manifest(run.folder)
        if manifest is None:
            if run.folder.exists() and any(run.folder.iterdir()):
                raise OutputExistsError(
                    f"{run.folder} has files but no {MANIFEST_NAME}: it was not made by this sweep. Move it away "
                    "or choose another output folder.")
            todo.append((run, None))
            continue
        same_notebook = Path(str(manifest.get("notebook"))).name == Path(run.notebook).name  # survives a moved checkout
        code = manifest.get("code")
        if same_notebook and code and run.code and code != run.code and manifest.get("status") == "ok":
            raise OutputExistsError(
                f"{run.folder} holds a run of an earlier version of {Path(run.notebook).name} (its code cells have "
                "changed since); it is never reused for the edited notebook. Choose another output folder (or move "
                "that run away).")
        if not same_notebook or canonical(manifest.get("parameters") or {}) != canonical(run.parameters):
            raise OutputExistsError(
                f"{run.folder} holds a run of {Path(str(manifest.get('notebook'))).name} with parameters "
                f"{manifest.get('parameters')}, not of {Path(run.notebook).name} with {run.parameters}; it is never "
                "reused for another request. Choose another output folder (or move that run away).")
        owner = manifest.get("owner") or {}
        if manifest.get("status") == "running" and owner and alive(owner, run.folder):
            raise OutputExistsError(
                f"{run.folder} is being run by another sweep (pid {owner.get('pid')} on {owner.get('host')}); wait "
                "for it to finish, or use another output folder. If that sweep is gone (its machine restarted), "
                f"move the folder into {ATTEMPTS}/ and run again.")
        if manifest.get("status") == "ok":
            run.status, run.reused = "ok", True
            for key in ("seconds", "error", "worker", "attempt", "started", "finished"):
                setattr(run, key, manifest.get(key, getattr(run, key)))
            continue
        todo.append((run, manifest))
    for run, manifest in todo:
        if manifest is not None:  # a failed or interrupted attempt: keep it aside, start clean
            run.attempt = int(manifest.get("attempt") or 1) + 1
            _set_aside(run, manifest)
    return [run for run, _ in todo]


def _set_aside(run: SweepRun, manifest: dict[str, Any]) -> None:
    archive = run.folder.parent / ATTEMPTS
    archive.mkdir(exist_ok=True)
    target = archive / f"{run.name}.attempt{run.attempt - 1}.{manifest.get('status', 'unknown')}"
    suffix = 1
    while target.exists():
        suffix += 1
        target = target.with_name(f"{target.name.split('~')[0]}~{suffix}")
    shutil.move(str(run.folder), str(target))


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
