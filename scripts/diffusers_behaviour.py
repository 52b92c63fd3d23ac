"""What the installed diffusers' ``Cosmos3OmniPipeline.__call__`` does with options left out, measured by running it.

The signature fixture (``diffusers-<version>.json``) says ``num_frames=None``; what the call then *uses* is only in
its body. So this runs the real pipeline on the embedded random-weight tiny model (``models.tiny.tiny_model_path``,
CPU, float32) with the options left out and records the values its own methods receive:

* **size** (``num_frames``, ``height``, ``width``, ``fps``, ``negative_prompt``, ``use_system_prompt`` left out):
  the arguments ``check_inputs``, ``tokenize_prompt`` and ``prepare_latents`` get, the chat messages it tokenizes
  and the shape of the blank pixel clip ``prepare_latents`` hands the VAE. Encoding and denoising 189 frames at
  1280x720 is far too slow on a CPU, so the run is stopped with a sentinel exception when that VAE encode is
  called (nothing before it is skipped).
* **sampling** (``num_inference_steps``, ``guidance_scale`` left out; one 32x32 frame): a full run to the end,
  recording the ``scheduler.set_timesteps`` call, the timesteps it made, the steps the callback saw, the guidance
  scale the pipeline kept and how many transformer passes each step made (two: classifier-free guidance).

Run through ``scripts/refresh_contracts.py --only diffusers-behaviour``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

PROMPT = "A robot arm sorts parcels on a conveyor belt."
SAMPLING_SIZE = {"num_frames": 1, "height": 32, "width": 32}  # multiples of the VAE's 16 px; one latent token


class _Stop(Exception):
    """Raised from the wrapped ``prepare_latents`` once the values are recorded (no denoising at full size)."""


def _wrap(owner: Any, name: str, record: Callable[[dict[str, Any]], None], stop: bool = False) -> None:
    """Replace ``owner.name`` (an instance attribute) with one that records its arguments and calls through;
    with ``stop``, raise ``_Stop`` instead of calling it."""
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        record({"args": args, **kwargs})
        if stop:
            raise _Stop
        return original(*args, **kwargs)

    setattr(owner, name, wrapper)


def _plain(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return repr(value)


def _load_pipeline():
    import torch
    from diffusers import Cosmos3OmniPipeline

    from cosmos_helpers.models.tiny import tiny_model_path

    return Cosmos3OmniPipeline.from_pretrained(str(tiny_model_path(0)), dtype=torch.float32)


def size_defaults() -> dict[str, Any]:
    """Leave out every size/prompt option; record what the pipeline resolves them to (stopped at its VAE encode)."""
    import torch

    pipe, seen = _load_pipeline(), {}
    keys = ("num_frames", "height", "width", "fps")
    _wrap(pipe, "check_inputs", lambda kw: seen.setdefault("check_inputs", {
        "height": kw["args"][3], "width": kw["args"][4], "num_frames": kw["args"][5],
        "guidance_scale": kw["args"][6]}))
    _wrap(pipe, "tokenize_prompt", lambda kw: seen.setdefault("tokenize_prompt", {
        k: _plain(kw.get(k)) for k in (*keys, "negative_prompt", "use_system_prompt")}))
    _wrap(pipe.text_tokenizer, "apply_chat_template", lambda kw: seen.setdefault("chat", []).append(
        [{"role": m["role"], "content": m["content"]} for m in kw["args"][0]]))
    _wrap(pipe, "prepare_latents", lambda kw: seen.setdefault("prepare_latents", {
        k: _plain(kw.get(k)) for k in keys}))
    _wrap(pipe, "_encode_video", lambda kw: seen.setdefault("vae_encode_input_shape", list(kw["args"][0].shape)),
          stop=True)
    try:
        pipe(PROMPT, output_type="latent", generator=torch.Generator().manual_seed(0))
    except _Stop:
        pass
    else:
        raise RuntimeError("the VAE encode was not reached: the probe no longer sees the pipeline's size")
    cond, uncond = seen.pop("chat")
    roles = [m["role"] for m in cond]
    return {**seen, "system_prompt_used": roles[0] == "system", "cond_user_text": cond[-1]["content"],
            "uncond_user_text": uncond[-1]["content"], "vae_scale_factors": {
                "spatial": int(pipe.vae.config.scale_factor_spatial),
                "temporal": int(pipe.vae.config.scale_factor_temporal)},
            "stopped_at": "prepare_latents' VAE encode of the blank [1, 3, T, H, W] clip (not run: too slow at this "
            "size on a CPU; nothing is denoised)"}


def sampling_defaults() -> dict[str, Any]:
    """Leave out the sampling options on a one-frame 32x32 run and run it to the end."""
    import torch

    pipe, seen, passes, steps = _load_pipeline(), {}, [], []
    _wrap(pipe.scheduler, "set_timesteps", lambda kw: seen.setdefault("set_timesteps", {
        "num_inference_steps": kw["args"][0] if kw["args"] else kw.get("num_inference_steps"),
        "sigmas_given": kw.get("sigmas") is not None}))
    pipe.transformer.register_forward_hook(lambda *_: passes.append(1))

    def on_step(pipeline: Any, index: int, timestep: Any, tensors: dict[str, Any]) -> dict[str, Any]:
        steps.append(index)
        return tensors

    pipe(PROMPT, **SAMPLING_SIZE, output_type="latent", generator=torch.Generator().manual_seed(0),
         callback_on_step_end=on_step)
    return {"given": dict(SAMPLING_SIZE), **seen, "timesteps": len(pipe.scheduler.timesteps),
            "callback_steps": len(steps), "guidance_scale": pipe.guidance_scale,
            "classifier_free_guidance": pipe.do_classifier_free_guidance,
            "transformer_passes_per_step": len(passes) / max(1, len(steps)),
            "scheduler": type(pipe.scheduler).__name__,
            "scheduler_flow_shift_of_the_tiny_checkpoint": pipe.scheduler.config.flow_shift,
            "use_native_flow_schedule": pipe.config.use_native_flow_schedule}


def diffusers_behaviour_contract() -> dict[str, Any]:
    """Both probes, with where they ran."""
    import diffusers
    import torch

    return {"package": "diffusers", "version": diffusers.__version__, "torch": torch.__version__,
            "pipeline": "Cosmos3OmniPipeline", "model": "cosmos_helpers.models.tiny.tiny_model_path(0) "
            "(random weights, real classes and latent shapes), CPU, float32",
            "method": "the real __call__ run with the options left out; the values are those its own methods "
            "received (check_inputs, tokenize_prompt, prepare_latents, scheduler.set_timesteps), the chat it "
            "tokenized, the pixel clip it hands the VAE and the steps/transformer passes it made. The size probe stops "
            "with a sentinel exception when prepare_latents calls the VAE (189 frames at 1280x720 cannot be encoded "
            "and denoised on a CPU); "
            "the sampling probe runs one 32x32 frame to the end.",
            "left_out": {"size": size_defaults(), "sampling": sampling_defaults()}}
