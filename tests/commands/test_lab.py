"""`cosmos-helpers lab` really serves the cookbooks, and their kernel is this environment's Python."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str, deadline: float, proc: subprocess.Popen, method: str = "GET") -> dict:
    while True:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=5) as answer:
                return json.loads(answer.read())
        except OSError:
            assert proc.poll() is None, "JupyterLab exited"
            assert time.monotonic() < deadline, "JupyterLab did not answer in time"
            time.sleep(0.5)


def _kernel_command(pid: int, deadline: float) -> list[str]:
    """The command line of the kernel the process started, from /proc: its child that runs ipykernel (JupyterLab
    starts other children too, such as npm where Node.js is installed)."""
    while True:
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    command = (stat.parent / "cmdline").read_bytes().decode().split("\0")
                    if "ipykernel_launcher" in command:
                        return command
            except (OSError, IndexError, ValueError):
                continue
        assert time.monotonic() < deadline, "no kernel process appeared"
        time.sleep(0.2)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the kernel's command line from /proc")
@pytest.mark.slow
def test_lab_serves_the_cookbooks_with_this_environments_kernel(tmp_path):
    port, token = _free_port(), "cookbook-test"
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"))
    proc = subprocess.Popen([sys.executable, "-m", "cosmos_helpers.cli", "lab", "--no-browser", "--port", str(port),
                             "--token", token, "--", "--ServerApp.port_retries=0", "--LabApp.news_url="],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        base, deadline = f"http://127.0.0.1:{port}/api", time.monotonic() + 90
        listing = _get(f"{base}/contents?token={token}", deadline, proc)
        _get(f"{base}/kernels?token={token}", deadline, proc, method="POST")  # the notebooks' default kernel
        kernel = _kernel_command(proc.pid, deadline)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    assert Path(kernel[0]).resolve() == Path(sys.executable).resolve()  # this environment's Python
    assert {"audiovisual", "transfer", "benchmarks"} <= {item["name"] for item in listing["content"]}
