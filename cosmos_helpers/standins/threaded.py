"""An ASGI app under uvicorn in a background thread of this process, on a free loopback port, and what every local
server shares (:class:`Service`)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from ..errors import BackendUnavailableError


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class Service:
    """``with service:`` starts it (``start()``) and stops it (``stop()``) on the way out."""

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("the server has not been started")
        return f"http://{self.host}:{self.port}"

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class ThreadedApp(Service):
    """``with ThreadedApp(app) as served: served.url``; ``lifespan`` as uvicorn's (``"on"`` runs the app's start-up,
    which may load a model: hence ``ready_timeout``)."""

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int | None = None, ready_timeout: float = 120.0,
                 lifespan: str = "on", name: str = "uvicorn") -> None:
        self.app, self.host, self.port = app, host, port or free_port(host)
        self.ready_timeout, self.lifespan, self.name = ready_timeout, lifespan, name
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self):
        import uvicorn

        config = uvicorn.Config(self.app, host=self.host, port=self.port, log_level="warning",
                                timeout_graceful_shutdown=1, lifespan=self.lifespan)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name=f"{self.name}-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.ready_timeout
        while not self._server.started:
            alive = self._thread.is_alive()
            if not alive or time.monotonic() > deadline:
                how = f"did not start in {self.ready_timeout}s" if alive else "exited during startup"
                self.stop()
                raise BackendUnavailableError(f"the {self.name} thread on port {self.port} {how}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self._server = self._thread = None
