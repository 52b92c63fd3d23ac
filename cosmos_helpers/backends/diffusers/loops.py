"""The three ways a call denoises in process (the pipeline's own call, the distilled blocks, the edit loop), behind
one shape: call arguments, then a denoise that reports steps and returns a :class:`Denoised`; the backend's runner
does the rest (lease, progress, timings, provenance)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ...precision import diffusers_call_kwargs
from ...presets import SOUND_SAMPLE_RATE
from ...request import GenerationRequest
from . import distilled, edit
from .arguments import action_kwargs, predicted_actions, prompt_options, video_kwargs

OnStep = Callable[[int], None]  # called after every denoising step with its 0-based index


@dataclass
class Denoised:
    """What a loop produced: frames ``(T, H, W, 3)`` (floats in [0, 1] or uint8), and the sound and predicted actions
    where the call made them (the timesteps it visited are the scheduler's)."""

    frames: np.ndarray
    sound: np.ndarray | None = None
    sample_rate: int = SOUND_SAMPLE_RATE
    actions: np.ndarray | None = None


class StockLoop:
    """The pipeline's own ``__call__``."""

    what = ""
    lends = True  # the backend's scheduler, guidance interval and fast path are lent for the call
    provenance: dict[str, Any] = {}

    def call_kwargs(self, request: GenerationRequest) -> dict[str, Any]:
        """The exact ``Cosmos3OmniPipeline.__call__`` arguments for a request (no generator/callback).

        Options left to the backend's default are not passed. A structured caption already carries its metadata
        (``request.prompt_text()``), so the sentence templates are off for it, as on the other backends.
        """
        if request.is_action:
            return {**action_kwargs(request), **diffusers_call_kwargs(request.precision)}
        kwargs: dict[str, Any] = dict(
            prompt=request.prompt_text(), negative_prompt=request.negative_prompt_text(),
            num_frames=request.num_frames, height=request.height, width=request.width, fps=request.fps,
            num_inference_steps=request.num_inference_steps, guidance_scale=request.guidance_scale,
            enable_sound=bool(request.sound), enable_safety_check=False)
        kwargs.update(prompt_options(request))
        if request.mode == "image2video":
            kwargs["image"] = request.conditioning_image()
        elif request.mode == "video2video":
            kwargs.update(video_kwargs(request))
        kwargs.update(diffusers_call_kwargs(request.precision))  # the FP8 schedule's overrides (none: the checkpoint's)
        return kwargs

    def denoise(self, pipe, request: GenerationRequest, kwargs: dict, on_step: OnStep, *, on_device: bool = False
                ) -> Denoised:
        """``on_device``: the fast path's conversion of the decoded video to uint8 on the GPU (same values)."""
        import torch

        def callback(_pipe, step, _timestep, callback_kwargs):
            on_step(step)
            return callback_kwargs  # diffusers pops "latents" from what we return

        with torch.inference_mode():
            output = pipe(**kwargs, generator=torch.Generator("cpu").manual_seed(request.seed),
                          callback_on_step_end=callback, output_type="pt" if on_device else "np", return_dict=True)
            if on_device:
                from ...fast.vae import video_to_host_uint8

                output.video = video_to_host_uint8(output.video)
        sound = None
        if request.sound and output.sound is not None:
            sound = output.sound.float().cpu().numpy()
            sound = sound[0] if sound.ndim == 3 else sound
        tokenizer = getattr(pipe, "sound_tokenizer", None)
        rate = int(tokenizer.config.get("sampling_rate", SOUND_SAMPLE_RATE)) if tokenizer is not None \
            else SOUND_SAMPLE_RATE
        return Denoised(_squeeze(output.video), sound, rate, predicted_actions(output, request))


class DistilledLoop:
    """A few-step checkpoint: its own fixed schedule, no guidance, no sound (:mod:`.distilled`)."""

    what = "distilled"
    lends = False  # the checkpoint's own scheduler; no fast path
    provenance = {"distilled": True}

    call_kwargs = staticmethod(distilled.call_kwargs)

    def denoise(self, pipe, request: GenerationRequest, kwargs: dict, on_step: OnStep, **_: Any) -> Denoised:
        frames, _timesteps = distilled.denoise(pipe, request, kwargs, on_step)  # the runner records the timesteps
        return Denoised(_squeeze(frames))


class EditLoop:
    """Image editing: the framework's edit batch on the pipeline's transformer (:mod:`.edit`)."""

    what = "edit"
    lends = True
    provenance = {"edit": True}

    def call_kwargs(self, request: GenerationRequest) -> dict[str, Any]:
        return {}

    def denoise(self, pipe, request: GenerationRequest, kwargs: dict, on_step: OnStep, **_: Any) -> Denoised:
        return Denoised(_squeeze(edit.edit(pipe, request, on_step)))


def loop_for(request: GenerationRequest):
    """The loop that runs ``request``: the distilled blocks for a distilled checkpoint, the edit loop for
    image2image, the pipeline's own call otherwise."""
    if distilled.is_distilled_model(request.model):
        return DistilledLoop()
    return EditLoop() if request.mode == "image2image" else StockLoop()


def _squeeze(frames: Any) -> np.ndarray:
    frames = np.asarray(frames)
    return frames[0] if frames.ndim == 5 else frames
