"""A local stand-in for a vLLM-Omni 0.30.0 server serving Cosmos3, on the Diffusers backend: ``LocalServer`` runs
``cosmos-helpers serve`` as a subprocess, ``ThreadedServer`` in a thread, ``create_app`` builds the FastAPI app.

Routes, fields, defaults, validation, answers and errors follow vLLM-Omni 0.30.0 (facts in
``cosmos_helpers.protocol.vllm_omni``, held to the real package by ``tests/contracts``); every request becomes a
``GenerationRequest`` carrying the values vLLM-Omni would use. Where the stand-in differs is listed once, in the
README ("Where the stand-in differs"), action requests in :mod:`.action_task`. Beyond that list: a 1-frame
text2video works and returns a 1-frame MP4, a ``size`` above the 720 action canvas is refused, and a text field over
its cap gets Starlette's 400 (upstream: the same, at its fixed 1 MiB).
"""

from __future__ import annotations

from ..._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {".local": "LocalServer ThreadedServer", ".app": "create_app"})
