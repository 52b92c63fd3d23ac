"""The options every command that runs notebooks with papermill shares: injected parameters, kernel, log output."""

from __future__ import annotations

import argparse
import ast
from typing import Any, Sequence


def add_notebook_arguments(parser: argparse.ArgumentParser, *, parameter_help: str) -> None:
    """``-p/--parameter NAME VALUE`` (repeatable; see :func:`parameters`), ``--kernel`` and ``--log-output``."""
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help=f"{parameter_help} (VALUE as a Python literal or plain text); repeatable")
    parser.add_argument("--kernel", default="python3", help="Jupyter kernel name (default python3)")
    parser.add_argument("--log-output", action="store_true", help="stream the notebooks' output while they run")


def parameters(pairs: Sequence[Sequence[str]]) -> dict[str, Any]:
    """``-p`` pairs as notebook parameters: a value that reads as a Python literal is that literal (``3``,
    ``[1, 2]``, ``None``), anything else stays text, so ``-p prompt 'a red ball'`` needs no extra quotes."""
    return {name: _literal(value) for name, value in pairs}


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
