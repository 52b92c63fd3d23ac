"""The few-step (distilled) Cosmos3 path of :class:`~cosmos_helpers.backends.diffusers.DiffusersBackend`: a diffusers
*modular* pipeline (``Cosmos3DistilledBlocks``) with its own fixed schedule and scheduler, taking no guidance, negative
prompt or sound (``protocol.variants``), so nothing of the backend's (scheduler, shift, fast path) is lent to it.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, Callable, Iterator

from ...errors import ValidationError
from ...models.tiny_distilled import INDEX_FILE, MODEL_NAME
from ...presets import get_profile
from ...protocol import variants
from ...request import GenerationRequest
from .arguments import call_kwargs  # noqa: F401  the distilled blocks take what the stock pipeline takes alike

DIFFUSERS_MODES = variants.DISTILLED_MODES["diffusers"]


def is_distilled_model(model: str) -> bool:
    """The embedded distilled stand-in, a published 4-step hub id, or a folder holding a distilled modular index."""
    if model == MODEL_NAME or model in variants.DISTILLED_CHECKPOINTS:
        return True
    index = Path(model).expanduser() / INDEX_FILE
    return index.is_file() and json.loads(index.read_text()).get("_blocks_class_name") == variants.DISTILLED_BLOCKS


def check_request(request: GenerationRequest, *, scheduler: Any, fast: Any, gpus: int = 1) -> bool:
    """Refuse a distilled checkpoint outside a distilled profile or with the base pipeline's options, and a base
    checkpoint under a distilled profile. Returns whether the checkpoint is distilled."""
    profile = get_profile(request.profile)
    if not is_distilled_model(request.model):
        if profile.distilled:
            raise ValidationError("model", f"profile {profile.name!r} is distilled (a fixed "
                                  f"{request.num_inference_steps}-step schedule, no guidance) but {request.model!r} is "
                                  f"a base checkpoint.", f"drop model= (the profile's is {profile.model}), or use a "
                                  "base profile.")
        return False
    if not profile.distilled:
        raise ValidationError("model", f"{request.model!r} is a distilled (few-step) checkpoint, but profile "
                              f"{profile.name!r} resolves steps, guidance and shift for a base model.",
                              "use a distilled profile ('tiny-distilled', 'super-t2i-4step', 'super-i2v-4step').")
    if gpus > 1:
        raise ValidationError("gpus", f"the distilled few-step path runs in this process, on one GPU (gpus={gpus} was "
                              "given).", "use DiffusersBackend(gpus=1) for a distilled model.")
    if request.mode not in DIFFUSERS_MODES:
        raise ValidationError("mode", f"diffusers' distilled blocks run {', '.join(DIFFUSERS_MODES)}, not "
                              f"{request.mode}.", "use one of those modes.")
    if scheduler is not None:
        raise ValidationError("scheduler", "a distilled checkpoint samples with its own fixed-schedule scheduler.",
                              "use DiffusersBackend() without scheduler= for distilled profiles.")
    if fast:
        raise ValidationError("fast", "the fast path is built for the base pipeline, not the distilled blocks.",
                              "use DiffusersBackend(fast=False) for distilled profiles.")
    return True


def load(source: str, **kwargs: Any):
    """``ModularPipeline.from_pretrained`` + ``load_components`` (dtype / device_map / token as for the base)."""
    from diffusers.modular_pipelines import ModularPipeline

    token = kwargs.pop("token", None)
    pipe = ModularPipeline.from_pretrained(source, **({"token": token} if token else {}))
    pipe.load_components(**kwargs)
    _quiet(pipe._blocks)
    return pipe


def _quiet(block) -> None:
    """No tqdm bar from the denoise loop, however deep it is nested (the backend shows its own)."""
    if hasattr(block, "set_progress_bar_config"):
        block.set_progress_bar_config(disable=True)
    for child in getattr(block, "sub_blocks", {}).values():
        _quiet(child)


@contextlib.contextmanager
def counting_steps(pipe, on_step: Callable[[int], None]) -> Iterator[None]:
    """Report each scheduler step for one call (the modular loop has no step callback)."""
    scheduler = pipe.scheduler
    step = scheduler.step

    def counted(*args: Any, **kwargs: Any):
        out = step(*args, **kwargs)
        on_step((scheduler.step_index or 1) - 1)  # the index of the step just taken
        return out

    scheduler.step = counted
    try:
        yield
    finally:
        del scheduler.step  # the class's method again


def denoise(pipe, request: GenerationRequest, kwargs: dict[str, Any], on_step: Callable[[int], None]):
    """The frames (``output_type='np'``) and the timesteps of one request, run with its :func:`call_kwargs`."""
    import torch

    with counting_steps(pipe, on_step), torch.inference_mode():
        frames = pipe(**kwargs, generator=torch.Generator("cpu").manual_seed(request.seed),
                      output="videos", output_type="np")
    return frames, [round(float(t), 3) for t in pipe.scheduler.timesteps]
