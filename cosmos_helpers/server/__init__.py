"""A local server that speaks the vLLM-Omni protocol for Cosmos3, backed by the Diffusers backend.

It lets the vLLM-Omni cookbook and the HTTP client run anywhere, offline: ``LocalServer`` starts
``cosmos-helpers serve`` as a subprocess; ``create_app`` builds the FastAPI app for embedding or tests.
Nothing heavy is imported here.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LocalServer", "ThreadedServer", "create_app"]


def __getattr__(name: str) -> Any:
    if name in ("LocalServer", "ThreadedServer"):
        from . import local

        return getattr(local, name)
    if name == "create_app":
        from .app import create_app

        return create_app
    raise AttributeError(f"module 'cosmos_helpers.server' has no attribute {name!r}")
