"""``cosmos-helpers lab``: open the cookbooks in JupyterLab, started by this environment's interpreter, so the
notebooks' ``python3`` kernel is this environment's (the one the tests use, with ``cosmos_helpers`` importable).

A workshop host: ``cosmos-helpers lab --ip 0.0.0.0 --port 8888 --token WORD``, then share
``http://HOST:8888/lab?token=WORD``. Anything after ``--`` goes to JupyterLab as it is.
"""

from __future__ import annotations

import argparse
import importlib.util
import ipaddress
import os
import sys
from pathlib import Path
from typing import Sequence

from ..errors import BackendUnavailableError, ValidationError
from ..notebooks import COOKBOOK_DIR, repo_root


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ip", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 for a workshop)")
    parser.add_argument("--port", type=int, default=8888, help="port (default 8888)")
    parser.add_argument("--token", default=None,
                        help="the token people log in with (default: a random one, printed in the URL)")
    parser.add_argument("--root", type=Path, default=None,
                        help="folder to open (default: the checkout's cookbooks/cosmos3/generator)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser on this machine")
    parser.add_argument("jupyter_args", nargs=argparse.REMAINDER,
                        help="after --: options passed to JupyterLab unchanged")


def lab_command(root: Path, *, ip: str = "127.0.0.1", port: int = 8888, token: str | None = None,
                browser: bool = True, extra: Sequence[str] = ()) -> list[str]:
    """The JupyterLab command line (the browser test starts exactly this)."""
    try:
        loopback = ipaddress.ip_address(ip).is_loopback
    except ValueError:
        loopback = ip == "localhost"
    if token == "" and not loopback:
        raise ValidationError("token", f"an empty token on {ip} lets anyone on the network run code.",
                              "pass --token WORD (or leave it out for a random one), or listen on 127.0.0.1.")
    command = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={root}", f"--ServerApp.ip={ip}",
               f"--ServerApp.port={port}"]
    if token is not None:
        command.append(f"--IdentityProvider.token={token}")
    if not browser:
        command.append("--no-browser")
    if os.geteuid() == 0:  # containers and workshop VMs often run as root; JupyterLab refuses that without it
        command.append("--allow-root")
    return command + [arg for arg in extra if arg != "--"]


def run(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("jupyterlab") is None:
        raise BackendUnavailableError("JupyterLab is not installed in this environment; run `make setup` "
                                      "(or `pip install -e .`) from the repository.")
    root = args.root or repo_root() / COOKBOOK_DIR
    if not root.is_dir():
        raise ValidationError("root", f"{root} is not a folder.", "pass --root with the folder to open.")
    command = lab_command(root, ip=args.ip, port=args.port, token=args.token, browser=not args.no_browser,
                          extra=args.jupyter_args)
    print(" ".join(command), flush=True)
    # JupyterLab takes this process over, so Ctrl-C reaches it as if started by hand (it stops its kernels).
    os.execv(command[0], command)
    return 0  # pragma: no cover - execv does not return
