"""Fixtures for the real-browser tests: a JupyterLab server on loopback and headless system Chromium.

Tools: ``/usr/bin/chromium`` (or ``COSMOS_HELPERS_CHROMIUM``), the ``playwright`` Python package (driving that
system browser through ``executable_path``; ``playwright install`` is never needed) and ``jupyterlab``.
``scripts/install_browser.sh`` installs all three. Missing tools skip these tests with the reason, unless
``COSMOS_HELPERS_REQUIRE_BROWSER=1`` (CI), where they fail.

Screenshots and console logs go to ``$COSMOS_HELPERS_ARTIFACTS`` (default ``.artifacts/browser/``).
"""

from __future__ import annotations

import http.server
import importlib.util
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest

from cosmos_helpers.commands.lab import lab_command

REPO = Path(__file__).resolve().parents[2]
COOKBOOKS = REPO / "cookbooks"
CHROMIUM = os.environ.get("COSMOS_HELPERS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
]
VIEWPORT = {"width": 1400, "height": 1000}


def missing_tools() -> list[str]:
    missing = []
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        missing.append(f"chromium ({CHROMIUM})")
    for module in ("playwright", "jupyterlab"):
        if importlib.util.find_spec(module) is None:
            missing.append(f"python package {module}")
    return missing


@pytest.fixture(scope="session")
def browser_tools() -> None:
    missing = missing_tools()
    if not missing:
        return
    reason = f"browser tests need {', '.join(missing)}; run scripts/install_browser.sh"
    if os.environ.get("COSMOS_HELPERS_REQUIRE_BROWSER") == "1":
        pytest.fail(reason + " (COSMOS_HELPERS_REQUIRE_BROWSER=1 makes this a failure)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def artifacts() -> Path:
    path = Path(os.environ.get("COSMOS_HELPERS_ARTIFACTS") or REPO / ".artifacts" / "browser")
    path.mkdir(parents=True, exist_ok=True)
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def kernel_env(**extra: str) -> dict[str, str]:
    """The environment for kernels: live widgets (no static override), progress bars on, one CPU thread each."""
    env = dict(os.environ)
    for name in ("COSMOS_HELPERS_STATIC", "COSMOS_HELPERS_NO_PROGRESS"):
        env.pop(name, None)
    env.setdefault("OMP_NUM_THREADS", "2")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.update(extra)
    return env


@dataclass
class Lab:
    url: str
    token: str
    root: Path
    log: Path
    proc: subprocess.Popen = field(repr=False)
    notary: Path = field(repr=False)  # the signatures folder the server trusts (NotebookNotary.data_dir)

    def notebook_url(self, relative: str) -> str:
        return f"{self.url}/lab/tree/{relative}?token={self.token}&reset"

    def add_executed(self, run) -> str:
        """Place an executed cookbook (a ``tests.cookbooks.runs.CookbookRun``) under ``executed/`` in the lab's root,
        signed as trusted, and return its path there.

        Signed because its outputs are what a kernel of this test run produced, as a notebook run in the lab is:
        JupyterLab renders trusted HTML output as it is (the players, the slider's ``oninput``) and sanitises the
        rest."""
        import nbformat
        from nbformat.sign import NotebookNotary

        relative = f"executed/{run.notebook}"
        notebook = nbformat.read(run.executed, as_version=4)
        NotebookNotary(data_dir=str(self.notary)).sign(notebook)
        (self.root / relative).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, str(self.root / relative))
        return relative


@pytest.fixture(scope="session")
def lab(browser_tools, tmp_path_factory, artifacts) -> Lab:
    """JupyterLab on 127.0.0.1 (random port, token auth), rooted at a temporary copy of the cookbooks."""
    root = tmp_path_factory.mktemp("lab-root")
    if COOKBOOKS.is_dir():
        shutil.copytree(COOKBOOKS, root / "cookbooks", ignore=shutil.ignore_patterns(
            "outputs", ".ipynb_checkpoints", "*.html", "*.preview*.mp4"))
        # nothing else: the stand-ins the notebooks run ship with the package (cosmos_helpers.standins)
    state = tmp_path_factory.mktemp("lab-state")
    (state / "notary").mkdir()
    port, token = free_port(), secrets.token_hex(16)
    log = artifacts / "jupyterlab.log"
    env = kernel_env(JUPYTERLAB_WORKSPACES_DIR=str(state / "workspaces"), JUPYTER_RUNTIME_DIR=str(state / "runtime"),
                     JUPYTERLAB_SETTINGS_DIR=str(state / "settings"))
    _quiet_lab_settings(state / "settings")
    # The command `cosmos-helpers lab` (and so `make lab`) starts, with what keeps a test run quiet and closed.
    command = lab_command(root, ip="127.0.0.1", port=port, token=token, browser=False, extra=[
        "--ServerApp.port_retries=0", "--LabApp.news_url=", "--ServerApp.allow_remote_access=False",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.extension_manager=readonly",
        "--ServerApp.terminals_enabled=False", f"--NotebookNotary.data_dir={state / 'notary'}"])
    handle = open(log, "w")
    proc = subprocess.Popen(command, cwd=root, env=env, stdout=handle, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_http(f"{url}/api/status?token={token}", proc, timeout=90)
        yield Lab(url=url, token=token, root=root, log=log, proc=proc, notary=state / "notary")
    finally:
        _stop(proc)
        handle.close()


def _quiet_lab_settings(settings: Path) -> None:
    """No "fetch news?" toast in screenshots, and every cell kept in the DOM (no notebook windowing), so the
    test sees all prompts and outputs."""
    for plugin, body in (("apputils-extension/notification", '{"fetchNews": "false", "checkForUpdates": false}'),
                         ("notebook-extension/tracker", '{"windowingMode": "none"}')):
        target = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)


def _wait_http(url: str, proc: subprocess.Popen, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with {proc.returncode}; see its log")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"JupyterLab did not answer at {url} within {timeout} s")


def _stop(proc: subprocess.Popen) -> None:
    """Stop the server we started (and the kernels it started: its own process group)."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


@pytest.fixture(scope="module")
def browser(browser_tools, tmp_path_factory):
    """Headless system Chromium with a fresh profile (``--user-data-dir``), one context per test module.

    Module scope matters: Playwright's sync API keeps an asyncio loop running in the main thread while it
    is open, which would break every later test that calls ``asyncio.run``."""
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, viewport=VIEWPORT)
        try:
            yield context
        finally:
            context.close()


@dataclass
class Console:
    """Console messages and page errors of one page, with the known-benign ones set apart."""

    errors: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    all: list[str] = field(default_factory=list)


# Known-benign browser console noise. Each entry: (substring, why it is harmless).
BENIGN_CONSOLE = [
    # http.server (the gallery check) has no favicon; Chromium asks for one on every page anyway.
    ("favicon.ico", "http.server has no favicon; the browser asks for one anyway"),
]


def watch_console(page) -> Console:
    console = Console()

    def record(kind: str, text: str) -> None:
        line = f"[{kind}] {text}"
        console.all.append(line)
        if kind not in ("error", "pageerror"):
            return
        if any(pattern in text for pattern, _ in BENIGN_CONSOLE):
            console.ignored.append(line)
        else:
            console.errors.append(line)

    page.on("console", lambda message: record(message.type, f"{message.text} {message.location.get('url', '')}"))
    page.on("pageerror", lambda error: record("pageerror", str(error)))
    return console


@pytest.fixture(scope="session")
def static_server():
    """Serve folders over http on loopback: ``serve(folder) -> base URL``."""
    servers = []

    def serve(folder: Path) -> str:
        handler = partial(_QuietHandler, directory=str(folder))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".mp4": "video/mp4"}

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@pytest.fixture
def scratch():
    path = Path(tempfile.mkdtemp(prefix="cosmos-browser-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)
