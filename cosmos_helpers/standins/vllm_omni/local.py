"""Starting the local vLLM-Omni-compatible server: as a subprocess (``LocalServer``, what notebooks use) or in a
thread (``ThreadedServer``). ``LocalServer`` runs in its own process group, fails its readiness wait at once (with
the log tail) if it dies, and is stopped on exit, on error and at interpreter exit, so none is left orphaned.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import warnings
import weakref
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ...backends.vllm_base import log_tail
from ...backends.vllm_omni import VllmOmniBackend
from ...backends.vllm_wire import API_KEY_ENV
from ..threaded import Service, ThreadedApp, free_port
from .settings import binding_warning

_LIVE: "weakref.WeakSet[LocalServer]" = weakref.WeakSet()


@dataclass(eq=False, repr=False)  # eq=False: hashable, for the registry of live servers
class LocalServer(Service):
    """``with LocalServer() as server: backend = server.client()``.

    ``model`` (``"tiny"``, a hub id or a checkpoint folder) or ``profile`` names what to serve (neither: the default
    profile's); ``port`` defaults to a free one; ``api_key`` goes in the environment, never on the command line;
    ``extra_args`` are more ``cosmos-helpers serve`` options; ``entry`` is the Python entry point that receives them
    (tests start doubles of the model this way); ``progress`` shows the readiness wait.
    """

    model: str | None = None
    _: KW_ONLY
    profile: str | None = None
    host: str = "127.0.0.1"
    port: int | None = None
    api_key: str | None = None
    ready_timeout: float = 300.0
    storage_dir: str | Path | None = None
    threads: int | None = None
    extra_args: Sequence[str] = ()
    env: dict[str, str] | None = None
    entry: Sequence[str] = ("-m", "cosmos_helpers.cli", "serve")
    progress: bool = True
    process: subprocess.Popen | None = field(default=None, init=False)
    log_path: Path | None = field(default=None, init=False)
    _log_dir: tempfile.TemporaryDirectory | None = field(default=None, init=False)
    _log_handle: Any = field(default=None, init=False)

    def argv(self) -> list[str]:
        argv = [sys.executable, *self.entry, "--host", self.host, "--port", str(self.port)]
        for flag, value in (("--model", self.model), ("--profile", self.profile), ("--storage-dir", self.storage_dir),
                            ("--threads", self.threads)):
            if value:
                argv += [flag, str(value)]
        return argv + list(self.extra_args)

    def start(self) -> "LocalServer":
        if self.running:
            return self
        self.port = self.port or free_port(self.host)
        self._log_dir = tempfile.TemporaryDirectory(prefix="cosmos-local-server-")
        self.log_path = Path(self._log_dir.name) / "server.log"
        self._log_handle = open(self.log_path, "wb")
        env = {"PYTHONUNBUFFERED": "1", **(os.environ if self.env is None else self.env)}
        env.pop(API_KEY_ENV, None)
        if self.api_key:
            env[API_KEY_ENV] = self.api_key  # not on the command line, where `ps` would show it
        self.process = subprocess.Popen(self.argv(), stdout=self._log_handle, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        _LIVE.add(self)
        try:
            self.client(progress=self.progress).wait_until_ready(self.ready_timeout, process=self.process,
                                                                 log=self.log_tail, interval=0.1)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the whole process group, wait, then kill; idempotent."""
        process = self.process
        if self.running:
            _signal_group(process, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout)
        if process is not None:
            _signal_group(process, signal.SIGKILL)  # a server past its timeout, and stragglers in the group
            process.wait(5)
        if self._log_handle is not None:
            self._log_handle.close()
            self._log_handle = None
        _LIVE.discard(self)

    def kill(self) -> None:
        """Kill the server abruptly (SIGKILL to its group), as a crash would."""
        if self.running:
            _signal_group(self.process, signal.SIGKILL)
            self.process.wait(5)

    def __del__(self) -> None:  # last resort; normal paths call stop()
        with contextlib.suppress(Exception):
            self.stop(timeout=2.0)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.process, self.log_path, lines)

    def client(self, **options: Any) -> VllmOmniBackend:
        return VllmOmniBackend(self.url, api_key=self.api_key, **{"poll_interval": 0.2, **options})

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"LocalServer({self.model!r}, url={self.url if self.port else None!r}, {state})"


def connect_vllm_omni(url: str | None = None, *, profile: str | None = None, api_key: str | None = None,
                      **options: Any):
    """A :class:`~cosmos_helpers.backends.vllm_omni.VllmOmniBackend` for the server at ``url``; without one, for a
    local stand-in server started now (serving ``profile``'s model) and stopped when the client is closed."""
    if url is not None:
        return VllmOmniBackend(url, api_key=api_key, **options)
    server = LocalServer(profile=profile, api_key=api_key).start()
    client = _LocalClient(server.url, api_key=api_key, **{"poll_interval": 0.2, **options})
    client.server = server
    return client


class _LocalClient(VllmOmniBackend):
    """The stand-in's client: closing it stops its server too."""

    def close(self) -> None:
        super().close()
        self.server.stop()


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)  # start_new_session=True: the group id is the child's pid


@atexit.register
def _stop_all() -> None:
    for server in list(_LIVE):
        with contextlib.suppress(Exception):
            server.stop(timeout=3.0)


class ThreadedServer(ThreadedApp):
    """``ThreadedServer(backend, **create_app_options)``: the app in a thread of this process (tests, benchmarks);
    generation runs in the app's own worker thread."""

    def __init__(self, backend: Any = None, *, host: str = "127.0.0.1", port: int | None = None,
                 ready_timeout: float = 120.0, **app_options: Any) -> None:
        from .app import create_app  # FastAPI and the backend load on first use

        if warning := binding_warning(host, app_options.get("api_key")):
            warnings.warn(warning, stacklevel=2)
        super().__init__(create_app(backend, **app_options), host=host, port=port, ready_timeout=ready_timeout)
