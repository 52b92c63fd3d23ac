"""Where is this output going: a live Jupyter front end (widgets work) or a static document?

Static means papermill, ``jupyter nbconvert --execute``, nbmake, a plain Python process or a terminal
IPython: the output is read later as a file (or on GitHub), where ipywidgets render as nothing. There we
emit self-contained HTML instead.

Decision, first match wins:

1. ``COSMOS_HELPERS_STATIC`` set: ``1``/``true``/``yes`` -> static, ``0``/``false``/``no`` -> live.
   Our notebook runner sets ``COSMOS_HELPERS_STATIC=1``.
2. No IPython kernel (plain Python, terminal IPython) -> static.
3. The kernel was started by a Jupyter server for a notebook session (``JPY_SESSION_NAME``) or by VS Code
   -> live.
4. The kernel's parent process is papermill, nbconvert, nbclient, nbmake or pytest -> static.
5. Otherwise -> live.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_HEADLESS_PARENTS = ("papermill", "nbconvert", "nbclient", "nbmake", "pytest", "nbval", "testbook")


def is_static() -> bool:
    """True when outputs should be static HTML rather than live ipywidgets (see the module docstring)."""
    forced = os.environ.get("COSMOS_HELPERS_STATIC", "").strip().lower()
    if forced in _TRUE:
        return True
    if forced in _FALSE:
        return False
    shell = _ipython()
    if shell is None or type(shell).__name__ != "ZMQInteractiveShell":
        return True
    if os.environ.get("JPY_SESSION_NAME") or os.environ.get("VSCODE_PID") or os.environ.get("VSCODE_CWD"):
        return False
    return _parent_is_headless()


def _ipython():
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency
        return None
    return get_ipython()


def _parent_is_headless() -> bool:
    pids = []
    for value in (os.environ.get("JPY_PARENT_PID"), str(os.getppid())):
        if value and value.isdigit() and value not in pids:
            pids.append(value)
    for pid in pids:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").lower()
        except OSError:
            continue
        if any(name in cmdline for name in _HEADLESS_PARENTS):
            return True
    return False


def emit(obj: Any, *, display: bool = True, via: Any = None) -> Any:
    """Display ``obj`` now (or ``via``, a stand-in such as a PNG of a figure) and return ``obj`` marked so
    that, returned as a cell's last expression, it is not shown a second time in the same cell; in later
    cells it shows as usual."""
    if not display:
        return obj
    shell = _ipython()
    if shell is None:
        return obj
    from IPython.display import display as ipy_display

    shown = via if via is not None else obj
    ipy_display(shown)
    shown_in = getattr(shell, "execution_count", None)

    def _ipython_display_() -> None:
        if getattr(_ipython(), "execution_count", None) == shown_in:
            return
        ipy_display(via if via is not None else _Undecorated(obj))

    try:
        obj._ipython_display_ = _ipython_display_
    except (AttributeError, TypeError):  # objects with __slots__: nothing to mark, IPython may show it again
        pass
    return obj


class _Undecorated:
    """Shows the wrapped object through its own rich representations, bypassing the one-shot marker."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def _repr_mimebundle_(self, include=None, exclude=None):
        from IPython.core.formatters import format_display_data

        marker = self.obj.__dict__.pop("_ipython_display_", None) if hasattr(self.obj, "__dict__") else None
        try:
            data, metadata = format_display_data(self.obj, include=include, exclude=exclude)
        finally:
            if marker is not None:
                self.obj._ipython_display_ = marker
        return data, metadata
