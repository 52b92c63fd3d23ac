"""Where is this output going: a live Jupyter front end (widgets work) or a static document? And showing one thing.

Static (papermill, nbconvert, nbmake, plain Python, terminal IPython): the output is read later as a file, where
ipywidgets render as nothing, so we emit self-contained HTML. ``COSMOS_HELPERS_STATIC=1`` / ``0`` forces static / live
(``run-cookbooks`` and the tests set it); otherwise only a kernel that a Jupyter server started for a notebook
session (``JPY_SESSION_NAME``) or VS Code started is live.
"""

from __future__ import annotations

import io
import os
from typing import Any

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def is_static() -> bool:
    """Whether outputs should be static HTML rather than live ipywidgets (see the module docstring)."""
    forced = os.environ.get("COSMOS_HELPERS_STATIC", "").strip().lower()
    if forced in _TRUE | _FALSE:
        return forced in _TRUE
    if type(_ipython()).__name__ != "ZMQInteractiveShell":  # None outside IPython; a terminal shell is static
        return True
    return not (os.environ.get("JPY_SESSION_NAME") or os.environ.get("VSCODE_PID") or os.environ.get("VSCODE_CWD"))


def _ipython():
    from IPython import get_ipython  # a dependency; None outside an IPython shell

    return get_ipython()


def present(obj: Any, *, display: bool = True, via: Any = None) -> Any:
    """Display ``obj`` (or ``via``, e.g. a PNG of a figure) in IPython and return ``None``, so a call as a cell's
    last line shows it once; ``display=False`` (or no IPython) returns ``obj`` undisplayed for the caller."""
    if not display or _ipython() is None:
        return obj
    from IPython.display import display as ipy_display

    ipy_display(via if via is not None else obj)
    return None


def present_figure(fig: Any, *, display: bool = True) -> Any:
    """:func:`present` for a matplotlib figure, shown as a PNG: a figure made without pyplot has no live display."""
    if not display or _ipython() is None:
        return fig
    from IPython.display import Image

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=fig.dpi)
    return present(fig, via=Image(data=buffer.getvalue(), format="png"))
