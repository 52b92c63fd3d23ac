"""Start the stand-in app on a Ray instance (a local one by default) and stop it; every wait has a deadline. Also
``cosmos-helpers serve-ray``: the app on a local Ray instance until Ctrl-C (for the real app,
``cosmos_helpers.protocol.ray_serve.cluster_commands`` prints the commands)."""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
from pathlib import Path
from typing import Any

from ...errors import BackendUnavailableError
from ...protocol import ray_serve as rs
from ..threaded import Service, free_port


def join_ray(address: str | None = None, *, num_cpus: int | None = None) -> bool:
    """Connect this process to Ray: ``address`` (``auto``, ``ray://host:10001``, ``host:6379``) or a new local
    instance of ``num_cpus`` CPUs. Returns whether this call started it (and so should shut it down)."""
    try:
        import ray
    except ImportError as exc:
        message = "Ray is not installed: pip install 'cosmos-helpers[ray]' (ray[serve] 2.60)."
        raise BackendUnavailableError(message) from exc
    if ray.is_initialized():
        return False
    where: dict[str, Any] = {"address": address} if address else {"num_cpus": num_cpus}
    ray.init(**where, include_dashboard=False, log_to_driver=False, configure_logging=False)
    return True


class LocalRayServe(Service):
    """The stand-in Ray Serve app on this machine's Ray instance (or ``address``'s cluster), its files in
    ``output_dir`` (served under ``/outputs``). ``start()`` waits up to ``timeout`` until each of ``replicas``
    (``num_cpus`` / ``num_gpus`` each) has loaded its model; then ``.url`` is the app's root and ``.backend()`` its
    client. ``stop()`` deletes the app, and shuts Serve and Ray down when this object started them."""

    def __init__(self, output_dir: str | Path, *, profile: str = "tiny", replicas: int = 2, num_cpus: float = 1,
                 num_gpus: float = 0, port: int | None = None, host: str = "127.0.0.1", address: str | None = None,
                 keep_going: bool = False, skip_invalid_samples: bool = False, timeout: float = 300.0) -> None:
        self.output_dir = Path(output_dir).expanduser().resolve()
        self.options = {"profile": profile, "replicas": int(replicas), "num_cpus": num_cpus, "num_gpus": num_gpus,
                        "keep_going": keep_going, "skip_invalid_samples": skip_invalid_samples}
        self.host, self.port, self.address, self.timeout = host, port or free_port(host), address, float(timeout)
        self._started_ray = self._started_serve = False

    def __repr__(self) -> str:
        return f"LocalRayServe({self.url!r}, output_dir={str(self.output_dir)!r})"

    def start(self) -> "LocalRayServe":
        from ray import serve
        from ray.serve.context import _get_global_client

        from .app import build_app

        cpus = int(max(1, self.options["num_cpus"] * self.options["replicas"]))
        self._started_ray = join_ray(self.address, num_cpus=cpus)
        # the running Serve's client, if any (asking Serve's public status() would start it, with default options)
        running = _get_global_client(raise_if_no_controller_running=False)
        self._started_serve = running is None
        if running is None:
            serve.start(http_options={"host": self.host, "port": self.port})
        else:  # Serve already runs on this cluster: its proxy keeps its own address, so the app is there
            config = running.http_config
            self.port = int(config.port)
            self.host = self.host if config.host in ("0.0.0.0", "::") else str(config.host)
        serve._run(build_app(self.output_dir, **self.options), _blocking=False, name=rs.APP_NAME,
                   route_prefix="/")
        self.wait_until_running()
        return self

    def wait_until_running(self) -> None:
        """Until the app reports RUNNING (every replica loaded); its failure or the deadline raises."""
        from ray import serve

        deadline, state = time.monotonic() + self.timeout, "not deployed"
        while time.monotonic() < deadline:
            app = serve.status().applications.get(rs.APP_NAME)
            state = str(getattr(app, "status", state))
            if state.endswith("RUNNING"):
                return
            if "FAIL" in state:
                raise BackendUnavailableError(f"the stand-in app failed to deploy: {app.message or state}")
            time.sleep(0.25)
        raise BackendUnavailableError(f"the stand-in app was not running after {self.timeout:g} s (last status: "
                                      f"{state}); is Ray short of CPUs for {self.options['replicas']} replicas?")

    def backend(self, **kwargs: Any) -> Any:
        """A client for this app (it shares this filesystem, so local inputs are sent as paths)."""
        from ...backends.framework_serve import FrameworkServeBackend

        return FrameworkServeBackend(self.url, shared_files=True, **kwargs)

    def stop(self) -> None:
        import ray
        from ray import serve

        if not ray.is_initialized():
            return
        if self._started_serve:
            serve.shutdown()
        else:
            serve.delete(rs.APP_NAME)
        if self._started_ray:
            ray.shutdown()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("outputs/ray_serve"),
                        help="the app's output folder (default outputs/ray_serve, the framework configs')")
    parser.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000, as serve run)")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default loopback)")
    parser.add_argument("--replicas", type=int, default=2, help="model replicas (default 2)")
    parser.add_argument("--num-cpus", type=float, default=1, help="CPUs per replica (default 1)")
    parser.add_argument("--num-gpus", type=float, default=0, help="GPUs per replica (default 0: CPU)")
    parser.add_argument("--address", default=None, help="an existing Ray cluster instead of a local instance")
    parser.add_argument("--profile", default="tiny", help="the embedded model to serve (default tiny)")
    parser.add_argument("--keep-going", action="store_true",
                        help="answer a failed sample with status 'error' (the framework's setup.keep_going)")
    parser.add_argument("--skip-invalid-samples", action="store_true",
                        help="answer a refused sample with status 'skip' (setup.skip_invalid_samples)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the replicas to load")


def run(args: argparse.Namespace) -> int:
    names = ("profile", "replicas", "num_cpus", "num_gpus", "port", "host", "address", "keep_going",
             "skip_invalid_samples", "timeout")
    with LocalRayServe(args.out, **{name: getattr(args, name) for name in names}) as server:
        print(f"stand-in Ray Serve app (tiny model, {args.replicas} replicas) at {server.url}; Ctrl-C stops it",
              flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0
