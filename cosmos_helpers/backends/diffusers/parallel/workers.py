"""The worker processes of a multi-GPU plan, seen from the notebook: one per GPU (:mod:`.worker`) over an
authenticated local connection, NVLink multicast off (:data:`MULTICAST_OFF`: on shared hosts NVLS can take the GPUs out
of service). Start-up, steps and stopping have timeouts; a worker that exits is reported (exit code, log tail) and the
whole group stopped: a half group cannot run a collective.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from multiprocessing.connection import Connection, Listener, wait
from pathlib import Path
from typing import Any, Callable

from ....errors import CosmosHelpersError, ValidationError
from ....standins.threaded import free_port
from .plan import ParallelPlan

MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
ADDRESS_ENV, AUTHKEY_ENV = "COSMOS_PARALLEL_ADDRESS", "COSMOS_PARALLEL_AUTHKEY"
_GROUPS: "weakref.WeakSet[WorkerGroup]" = weakref.WeakSet()


class WorkerError(CosmosHelpersError, RuntimeError):
    """A worker process of a multi-GPU plan failed, exited or went silent; the group has been stopped."""


class WorkerGroup:
    """``plan.gpus`` worker processes running one pipeline ``spec`` together (``device``, ``dtype``, ``fast``,
    ``memory_kwargs``, ``scheduler``, ``token``, ``builder``: the backend's). ``step_timeout``: seconds without a
    word from the workers during a generation (loading included) before they are declared stuck."""

    def __init__(self, plan: ParallelPlan, spec: dict[str, Any], *, start_timeout: float = 300.0,
                 step_timeout: float = 1800.0, stop_timeout: float = 20.0) -> None:
        self.plan, self.spec = plan, dict(spec)
        self.start_timeout, self.step_timeout, self.stop_timeout = start_timeout, step_timeout, stop_timeout
        self.procs: list[subprocess.Popen] = []
        self.conns: dict[int, Connection] = {}
        self.worker_env: dict[int, dict] = {}
        self.logs: list[Path] = []
        self._log_dir: tempfile.TemporaryDirectory | None = None
        self._lock = threading.Lock()

    @property
    def alive(self) -> bool:
        return bool(self.procs) and all(p.poll() is None for p in self.procs)

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def start(self) -> "WorkerGroup":
        if self.procs:
            return self
        authkey = secrets.token_bytes(32)
        listener = Listener(("127.0.0.1", 0), authkey=authkey)
        self._log_dir = tempfile.TemporaryDirectory(prefix="cosmos-workers-")
        try:
            host, port = listener.address
            package_root = str(Path(__file__).resolve().parents[__package__.count(".") + 1])  # for PYTHONPATH
            for rank in range(self.plan.gpus):
                env = dict(os.environ, **MULTICAST_OFF, RANK=str(rank), LOCAL_RANK=str(rank),
                           WORLD_SIZE=str(self.plan.gpus), COSMOS_PARENT_PID=str(os.getpid()),
                           **{ADDRESS_ENV: f"{host}:{port}", AUTHKEY_ENV: authkey.hex()},
                           PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
                log = Path(self._log_dir.name) / f"rank{rank}.log"
                self.logs.append(log)
                with open(log, "wb") as out:
                    self.procs.append(subprocess.Popen([sys.executable, "-m", f"{__package__}.worker"],
                                                       env=env, stdout=out, stderr=subprocess.STDOUT,
                                                       stdin=subprocess.DEVNULL))
            self._accept(listener)
            spec = dict(self.spec, port=free_port(), plan=self.plan.__dict__.copy())
            spec.setdefault("collective_timeout", self.step_timeout)
            for conn in self.conns.values():
                conn.send(("setup", spec))
            self._collect("ready", None, self.start_timeout)
        except BaseException:
            self.stop(graceful=False)
            raise
        finally:
            listener.close()
        _GROUPS.add(self)
        return self

    def _accept(self, listener: Listener) -> None:
        accepted: list[Connection] = []

        def accept_all() -> None:
            with contextlib.suppress(OSError, EOFError):  # closed by a timeout, or a connection with a wrong key
                while len(accepted) < self.plan.gpus:
                    accepted.append(listener.accept())

        thread = threading.Thread(target=accept_all, daemon=True, name="worker-accept")
        thread.start()
        deadline = time.monotonic() + self.start_timeout
        while thread.is_alive() and time.monotonic() < deadline:
            self._check_exits()
            thread.join(0.2)
        if len(accepted) < self.plan.gpus:
            listener.close()
            raise WorkerError(f"only {len(accepted)} of {self.plan.gpus} workers connected within "
                              f"{self.start_timeout:.0f} s{self._log_tail()}")
        for conn in accepted:
            _, rank, info = conn.recv()  # ("hello", rank, its pid and environment)
            self.conns[rank], self.worker_env[rank] = conn, info

    def stop(self, *, graceful: bool = True) -> None:
        """Ask every worker to stop, then kill what is left after ``stop_timeout`` s (at once when not ``graceful``:
        after a failure the others may be blocked in a collective)."""
        with self._lock:
            for conn in self.conns.values():
                with contextlib.suppress(OSError):
                    conn.send(("stop",))
            deadline = time.monotonic() + (self.stop_timeout if graceful else 0.0)
            for proc in self.procs:
                try:
                    proc.wait(max(deadline - time.monotonic(), 0.1))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
            for conn in self.conns.values():
                conn.close()
            self.procs, self.conns = [], {}
            if self._log_dir is not None:
                self._log_dir.cleanup()
                self._log_dir = None
            self.logs = []
            _GROUPS.discard(self)

    def generate(self, request: Any, progress: Callable[[int, int], None] | None = None) -> Any:
        """Send ``request`` to every rank; return rank 0's ``Generation`` once every rank is done."""
        if self.procs and not self.alive:
            self._check_exits()  # a worker that died between calls: say which rank and how it ended
        if not self.alive:
            raise WorkerError("the worker group is not running (stopped, or a worker exited); "
                              "the next call of the backend starts a new one.")
        for conn in self.conns.values():
            conn.send(("generate", request))
        return self._collect("done", progress, self.step_timeout)

    def _collect(self, kind: str, progress, timeout: float) -> Any:
        """Wait for ``kind`` from every rank, relaying steps; any error, exit or silence stops the group."""
        waiting, result = set(self.conns), None
        last = time.monotonic()
        while waiting:
            ready = wait(list(self.conns.values()), 1.0)
            if not ready:
                self._check_exits()
                if time.monotonic() - last > timeout:
                    self._fail(f"no word from ranks {sorted(waiting)} for {timeout:.0f} s")
                continue
            for conn in set(ready):
                try:
                    what, rank, payload = conn.recv()
                except (EOFError, OSError):
                    self._check_exits(grace=5.0)
                    self._fail("a worker closed its connection")
                last = time.monotonic()
                if what == "step" and progress is not None:
                    progress(*payload)
                elif what == "invalid":
                    self.stop(graceful=False)
                    raise ValidationError(*payload)
                elif what == "error":
                    self._fail(f"rank {rank} failed:\n{payload}")
                elif what == kind:
                    waiting.discard(rank)
                    result = payload if rank == 0 else result
        return result

    def _check_exits(self, grace: float = 0.0) -> None:
        deadline = time.monotonic() + grace
        while True:
            for rank, proc in enumerate(self.procs):
                if proc.poll() is not None:
                    self._fail(f"worker rank {rank} (pid {proc.pid}) exited with code {proc.returncode}")
            if time.monotonic() >= deadline:
                return
            time.sleep(0.1)

    def _fail(self, what: str) -> None:
        tail = self._log_tail()
        self.stop(graceful=False)
        raise WorkerError(f"multi-GPU generation stopped: {what}. Every worker has been stopped; the next call "
                          f"starts new ones.{tail}")

    def _log_tail(self, lines: int = 15) -> str:
        out = []
        for rank, log in enumerate(self.logs):
            try:
                text = log.read_text(errors="replace").strip().splitlines()[-lines:]
            except OSError:
                continue
            if text:
                out.append(f"\n--- rank {rank} log (last lines) ---\n" + "\n".join(text))
        return "".join(out)


@atexit.register
def _stop_all() -> None:
    for group in list(_GROUPS):
        group.stop()
