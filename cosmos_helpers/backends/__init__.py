"""The backends, and the one place that builds one from its name (the CLI and ``run_spec`` use it)."""

from __future__ import annotations

import os
from typing import Any

from ..errors import ValidationError

NAMES: tuple[str, ...] = ("diffusers", "framework", "vllm-omni", "framework-serve")
URL_BACKENDS: tuple[str, ...] = ("vllm-omni", "framework-serve")


def backend_by_name(name: str, *, url: str | None = None, checkout: str | os.PathLike[str] | None = None,
                    gpus: int = 1, progress: bool = True) -> Any:
    """The backend ``name``, its heavy libraries loaded only then; a ``url``, ``checkout`` or ``gpus`` it cannot use
    is refused before any work, not dropped."""
    for option, value, owners in (("url", url, URL_BACKENDS), ("checkout", checkout, ("framework",))):
        if value and name not in owners and name in NAMES:
            raise ValidationError(option, f"{option} is for the {' and '.join(owners)} backends; the {name} backend "
                                  "does not use it.", f"drop {option}, or use backend '{owners[0]}'.")
    if name == "framework-serve":
        if gpus != 1:
            raise ValidationError("gpus", f"each replica of a Ray Serve deployment spans the world_size GPUs its "
                                  f"serve config gives it; a client cannot ask for {gpus}.",
                                  "set world_size under models.<name> of the serve config, and drop gpus.")
        if not url:
            raise ValidationError("url", "the framework-serve backend needs the Ray Serve app's URL.",
                                  "pass url= (--url http://head-node:8000); start a local stand-in with "
                                  "`cosmos-helpers serve-ray`.")
        from .framework_serve import FrameworkServeBackend

        return FrameworkServeBackend(url, progress=progress)
    if name == "vllm-omni" and gpus != 1:
        raise ValidationError("gpus", f"a vLLM-Omni server's GPUs are set when it starts; a client cannot ask for "
                              f"{gpus}.", "start the server on them (serve_command(model, gpus=...) prints its "
                              "command line), and drop gpus.")
    if name == "diffusers":
        from .diffusers import DiffusersBackend

        return DiffusersBackend(progress=progress, gpus=gpus)
    if name == "framework":
        if not checkout:
            raise ValidationError("checkout", "the framework backend needs a cosmos-framework checkout.",
                                  "pass checkout= (--checkout) the path of the checkout on a GPU host, or use "
                                  "backend 'diffusers'.")
        from .framework import FrameworkBackend

        return FrameworkBackend(checkout, gpus=gpus, progress=progress)
    if name == "vllm-omni":
        if not url:
            raise ValidationError("url", "the vllm-omni backend needs a server URL.",
                                  "pass url= (--url http://host:8000); start a local one with `cosmos-helpers serve`.")
        from .vllm_omni import VllmOmniBackend

        return VllmOmniBackend(url, progress=progress)
    raise ValidationError("backend", f"unknown backend {name!r}.", f"use one of {', '.join(NAMES)}.")
