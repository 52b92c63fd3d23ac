"""Audio-conditioned generation (the framework's ``model_mode: "audio_image2video"``) on diffusers. EXPERIMENTAL.

As the framework's ``inference/sound.py``: the clip resampled to 48 kHz (``resample_poly``), stereo, trimmed or padded
to the video's duration, encoded with the pipeline's audio tokenizer (25 latents per second) and packed as **clean**
sound tokens beside the optional image; only the video is denoised, in our own loop (``Cosmos3OmniPipeline`` only
*generates* sound). The packing follows diffusers' own sound segment and is **not verified against the framework**;
the published audio tokenizer may ship without encoder weights (then :func:`encode_audio` explains and fails).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ... import media
from ...errors import BackendUnavailableError, ValidationError
from ...presets import DEFAULT_PROFILE, SOUND_SAMPLE_RATE, VIDEO_SIZES, get_profile, model_for, size_for
from ...result import Generation
from ...schedules import native_flow_scheduler
from ...specs.resolve import ResolvedSample
from ...specs.transfer import format_transfer_prompt
from .runner import StepClock

WAV_EXTENSIONS = frozenset({".wav", ".wave"})
PACKED = ("input_ids", "text_indexes", "position_ids", "und_len", "sequence_length", "vision_token_shapes",
          "vision_sequence_indexes", "vision_mse_loss_indexes", "vision_noisy_frame_indexes", "sound_token_shapes",
          "sound_sequence_indexes", "sound_mse_loss_indexes", "sound_noisy_frame_indexes")  # a pack's, as passed
EXPERIMENTAL_NOTE = ("EXPERIMENTAL: audio-conditioned generation on diffusers packs the clip as clean sound tokens; "
                     "the packing is not verified against the Cosmos Framework.")


def load_audio_clip(path: str | os.PathLike[str]) -> tuple[np.ndarray, int]:
    """A sound clip as float32 ``(channels, samples)`` in [-1, 1] and its rate: WAV through ``scipy.io.wavfile``
    (integer samples scaled: PyAV would keep their range), anything else (an MP4's track included) through PyAV."""
    path = Path(path)
    if not path.is_file():
        raise ValidationError("sound_path", f"file not found: {path}.", "fix the path (relative to the input file).")
    if path.suffix.lower() in WAV_EXTENSIONS:
        from scipy.io import wavfile

        rate, data = wavfile.read(str(path))
        if np.issubdtype(data.dtype, np.integer):
            data = data.astype(np.float32) / float(np.iinfo(data.dtype).max)
        data = data.astype(np.float32)
        return np.ascontiguousarray((data[:, None] if data.ndim == 1 else data).T), int(rate)
    try:
        sound, rate = media.read_audio(path)
    except Exception as exc:  # av errors
        raise ValidationError("sound_path", f"cannot decode audio from {path}: {exc}.", "use a WAV file.") from exc
    if sound is None:
        raise ValidationError("sound_path", f"{path} has no audio stream.", "use a WAV file or a video with sound.")
    return sound.astype(np.float32), int(rate)


def conform_audio(samples: np.ndarray, sample_rate: int, num_frames: int, fps: float,
                  target_rate: int = SOUND_SAMPLE_RATE) -> np.ndarray:
    """Float32 ``(2, N)``: resampled to ``target_rate`` (``resample_poly`` with up/down reduced by their gcd, as the
    framework does), stereo, trimmed or zero-padded to ``int(num_frames / fps * target_rate)``."""
    from scipy.signal import resample_poly

    samples = np.asarray(samples, dtype=np.float32)
    if samples.ndim not in (1, 2) or samples.shape[-1] == 0:
        raise ValidationError("sound", f"expected (channels, samples) audio, got shape {samples.shape}.",
                              "pass a non-empty clip.")
    audio = np.atleast_2d(samples)  # mono (N,) -> (1, N)
    if sample_rate != target_rate:
        divisor = math.gcd(int(target_rate), int(sample_rate))
        audio = resample_poly(audio, target_rate // divisor, int(sample_rate) // divisor, axis=1).astype(np.float32)
    if audio.shape[0] > 2:
        audio = audio.mean(axis=0, keepdims=True)
    if audio.shape[0] == 1:
        audio = np.repeat(audio, 2, axis=0)
    length = int(num_frames / fps * target_rate)
    return np.pad(audio[:, :length], ((0, 0), (0, max(length - audio.shape[1], 0))))


def encode_audio(pipe: Any, waveform: np.ndarray):
    """Sound latents ``[sound_dim, ceil(N / hop)]`` of a ``(2, N)`` waveform with the pipeline's audio tokenizer."""
    import torch

    tokenizer = getattr(pipe, "sound_tokenizer", None)
    if tokenizer is None:
        raise BackendUnavailableError("this checkpoint has no audio tokenizer, so it cannot condition on sound.")
    if getattr(tokenizer, "encoder", None) is None or not getattr(tokenizer, "_encoder_available", True):
        raise BackendUnavailableError(
            "the checkpoint's audio tokenizer was loaded without encoder weights (decoder-only), so it cannot "
            "encode a conditioning clip; use the Cosmos Framework backend for audio_image2video.")
    hop = int(tokenizer._hop_size)
    wave = np.asarray(waveform, dtype=np.float32)
    wave = np.pad(wave, ((0, 0), (0, -wave.shape[1] % hop)))
    param = next(tokenizer.parameters())
    with torch.no_grad():
        dist = tokenizer.encode(torch.from_numpy(wave)[None].to(device=param.device, dtype=param.dtype)).latent_dist
    return dist.mean[0].float()


@dataclass(frozen=True)
class AudioCall:
    """One audio-conditioned generation: texts as tokenised, size, length, sampling, the conformed clip."""

    prompt: str
    negative_prompt: str | None
    waveform: np.ndarray  # float32 (2, N) at presets.SOUND_SAMPLE_RATE, trimmed/padded to the video's duration
    image: np.ndarray | None  # uint8 (H, W, 3) at the output size, or None
    width: int
    height: int
    num_frames: int
    fps: float
    num_steps: int
    guidance: float
    shift: float
    seed: int
    templates: bool


def generate_with_audio(prompt: str, sound: np.ndarray | str | os.PathLike[str], *, image: Any = None,
                        negative_prompt: str | None = None, sample_rate: int | None = None, width: int | None = None,
                        height: int | None = None, num_frames: int | None = None, fps: float | None = None,
                        num_steps: int | None = None, guidance: float | None = None, shift: float | None = None,
                        seed: int = 0, model: str | None = None, guardrails: bool = False, backend: Any,
                        templates: bool = False, progress: bool | Callable[[int, int], None] = True) -> Generation:
    """EXPERIMENTAL. A video conditioned on a sound clip (a path, or float ``(channels, samples)`` at
    ``sample_rate``) and optionally a first-frame image, on ``backend``'s shared weights.

    The texts are tokenised as given (``templates=True`` appends diffusers' duration and resolution sentences); what
    is left out is the default profile's (image2video). The result's ``sound`` is the clip as used, so the saved MP4
    carries it; with ``guardrails`` the backend's guardrails check the prompt and the video.
    """
    d = get_profile(DEFAULT_PROFILE).defaults("image2video")
    size = size_for(d.tier, d.aspect_ratio)

    def pick(value: Any, default: Any) -> Any:
        return default if value is None else value

    width, height = pick(width, size[0]), pick(height, size[1])
    num_frames, fps = pick(num_frames, d.num_frames), float(pick(fps, d.fps))
    if (num_frames - 1) % 4 or num_frames < 1:
        raise ValidationError("num_frames", f"{num_frames} is not 4k+1.", "use e.g. 9, 17 or 189.")
    if isinstance(sound, (str, os.PathLike)):
        samples, sample_rate = load_audio_clip(sound)
    elif sample_rate is None:
        raise ValidationError("sample_rate", "raw samples need their sample rate.",
                              f"pass sample_rate={SOUND_SAMPLE_RATE}, or the clip's own rate.")
    else:
        samples = np.asarray(sound, dtype=np.float32)
    frame = None if image is None else media.fit_to_bucket(np.asarray(media.load_image(image)), width, height)
    call = AudioCall(prompt=prompt, negative_prompt=negative_prompt, image=frame,
                     waveform=conform_audio(samples, int(sample_rate), num_frames, fps), width=width, height=height,
                     num_frames=num_frames, fps=fps, num_steps=pick(num_steps, d.num_inference_steps),
                     guidance=pick(guidance, d.guidance_scale), shift=pick(shift, d.flow_shift), seed=int(seed),
                     templates=templates)
    started, model = time.perf_counter(), model_for(model=model)  # on the shared pipeline, held under its lock
    checker = backend.guardrails.check_prompt(guardrails, call.prompt)
    clock = StepClock(call.num_steps, "audio->video (experimental)", bar=progress is True,
                      callback=progress if callable(progress) else None, started=started)
    with clock, backend.borrowed(model) as pipe:
        clock.load_s = time.perf_counter() - started
        clock.call_start = time.perf_counter()
        video, sound_frames, device = _generate(pipe, call, lambda _: clock.step())
    return Generation(
        frames=backend.guardrails.check_frames(checker, media.to_uint8(video)), fps=call.fps, seed=call.seed,
        sound=call.waveform, sample_rate=SOUND_SAMPLE_RATE, backend="diffusers", model=str(model),
        timings=clock.timings,
        provenance={"workflow": "audio_image2video", "experimental": EXPERIMENTAL_NOTE, "prompt": call.prompt,
                    "negative_prompt": call.negative_prompt, "num_steps": call.num_steps, "guidance": call.guidance,
                    "shift": call.shift, "sound_latent_frames": sound_frames,
                    "image_conditioned": call.image is not None, "scheduler": "NativeFlowUniPCScheduler",
                    "device": device, "guardrails": guardrails})


def _generate(pipe, call: AudioCall, on_step: Callable[[int], None]) -> tuple[np.ndarray, int, str]:
    """Encode the clip, pack, denoise the video only, decode."""
    import torch

    device = pipe._get_execution_device()
    with torch.inference_mode():
        latents, packs, sound_latents, vision_mask = _prepare(pipe, call, device)
        scheduler = native_flow_scheduler(pipe.scheduler.config, call.shift)
        scheduler.set_timesteps(call.num_steps, device=device)
        noisy, pinned = 1.0 - vision_mask, vision_mask * latents
        for i, t in enumerate(scheduler.timesteps):
            velocities = [_velocity(pipe, pack, latents, sound_latents, t, device) * noisy
                          for pack in packs[: 2 if call.guidance != 1.0 else 1]]
            velocity = velocities[0] if len(velocities) == 1 else (
                velocities[1] + call.guidance * (velocities[0] - velocities[1]))
            latents = scheduler.step(velocity.unsqueeze(0), t, latents.unsqueeze(0), return_dict=False)[0].squeeze(0)
            latents = noisy * latents + pinned  # re-pin the image frame exactly
            on_step(i + 1)
        return _decode(pipe, latents), int(sound_latents.shape[1]), str(device)


def _prepare(pipe, call: AudioCall, device):
    """Tokens, initial latents (image frame clean), the clip's sound latents and the two packed sequences."""
    import torch

    generator = torch.Generator("cpu").manual_seed(call.seed)
    pil = None if call.image is None else media.load_image(call.image)
    cond_ids, uncond_ids = pipe.tokenize_prompt(
        call.prompt, call.negative_prompt, num_frames=call.num_frames, height=call.height, width=call.width,
        fps=call.fps, use_system_prompt=True, add_resolution_template=call.templates,
        add_duration_template=call.templates)
    latents, noise_sound, _, fps_vision, fps_sound, vision_mask, _, *_rest = pipe.prepare_latents(
        image=pil, num_frames=call.num_frames, height=call.height, width=call.width, fps=call.fps,
        generator=generator, device=device, dtype=torch.float32, enable_sound=True)
    sound_latents = encode_audio(pipe, call.waveform).to(device)
    channels, length = noise_sound.shape  # the AVAE hop rounds the clip: trimmed or zero-padded to the planned length
    sound_latents = torch.nn.functional.pad(sound_latents[:channels], (0, length - sound_latents.shape[1]))
    condition = [int(i) for i in torch.nonzero(vision_mask[:, 0, 0] > 0).flatten()]
    packs = [_pack(pipe, ids, latents, sound_latents, condition, fps_vision, fps_sound, device)
             for ids in (cond_ids, uncond_ids)]
    return latents, packs, sound_latents.to(pipe.transformer.dtype), vision_mask


def _velocity(pipe, pack: dict[str, Any], latents, sound_tokens, t, device):
    """One transformer pass: the video velocity, with every sound token clean (timestep-free, never stepped)."""
    import torch

    timesteps = torch.full((pack["num_noisy_vision_tokens"],), t.item(), device=device)
    preds, _, _ = pipe.transformer(
        **{name: pack[name] for name in PACKED}, vision_tokens=[latents.to(pipe.transformer.dtype)],
        vision_timesteps=timesteps, sound_tokens=[sound_tokens], sound_timesteps=torch.zeros(0, device=device),
        return_dict=False)
    return preds[0].float()


def _pack(pipe, input_ids, latents, sound_latents, condition, fps_vision, fps_sound, device) -> dict[str, Any]:
    """One static sequence ``[text | video (frame 0 clean with an image) | sound (all clean)]``."""
    import torch

    text = pipe._prepare_text_segment(input_ids, device=device)
    vision = pipe._prepare_vision_segment(
        input_vision_tokens=latents, has_image_condition=bool(condition),
        mrope_offset=text["vision_start_temporal_offset"], vision_fps=fps_vision, curr=text["und_len"],
        device=device, condition_frame_indexes=condition)
    sound = pipe._prepare_sound_segment(
        input_sound_tokens=sound_latents, mrope_offset=text["vision_start_temporal_offset"], sound_fps=fps_sound,
        curr=text["und_len"] + vision["num_vision_tokens"], device=device)
    empty = torch.zeros(0, dtype=torch.long, device=device)
    sound["sound_noisy_frame_indexes"] = [empty]
    sound["sound_mse_loss_indexes"] = empty
    return {**text, **vision, **sound,
            "position_ids": torch.cat([text["text_mrope_ids"], vision["vision_mrope_ids"], sound["sound_mrope_ids"]],
                                      dim=1),
            "sequence_length": text["und_len"] + vision["num_vision_tokens"] + sound["sound_len"]}


def _decode(pipe, latents) -> np.ndarray:
    import torch

    vae_dtype = pipe.vae.dtype
    mean = torch.tensor(pipe.vae.config.latents_mean, dtype=vae_dtype, device=latents.device).view(1, -1, 1, 1, 1)
    std = torch.tensor(pipe.vae.config.latents_std, dtype=vae_dtype, device=latents.device).view(1, -1, 1, 1, 1)
    latents = latents if latents.ndim == 5 else latents.unsqueeze(0)
    raw = latents.to(vae_dtype) * std + mean
    video = pipe.vae.decode(raw).sample.float().clamp(-1, 1)[0]  # [3, T, H, W]
    return ((video.permute(1, 2, 3, 0) + 1.0) / 2.0).cpu().numpy()


def run_audio_sample(r: ResolvedSample, *, backend: Any,
                     progress: bool | Callable[[int, int], None] = True) -> Generation:
    """EXPERIMENTAL. A resolved ``audio_image2video`` sample (``sound_path`` + image ``vision_path``); its prompt
    gets the framework's metadata or sentence templates, as every framework generation mode."""
    if r.model_mode != "audio_image2video":
        raise ValidationError("model_mode", f"expected audio_image2video, got {r.model_mode}.",
                              'set "model_mode": "audio_image2video".')
    if r.seed is None:
        raise ValidationError("seed", "no seed and no output folder to derive one from.", "set seed.")
    width, height = VIDEO_SIZES[r.resolution][r.aspect_ratio]
    image = None
    if r.vision_path is not None:
        image = media.read_media(r.vision_path, max_frames=1, field="vision_path").frames[0]
    prompt, negative = format_transfer_prompt(r.prompt, r.negative_prompt, r, width, height, r.num_frames, r.fps)
    return generate_with_audio(prompt, r.sound_path, image=image, negative_prompt=negative, width=width,
                               height=height, num_frames=r.num_frames, fps=float(r.fps), num_steps=r.num_steps,
                               guidance=r.guidance, shift=r.shift, seed=int(r.seed), model=r.model,
                               guardrails=r.guardrails, backend=backend, progress=progress)
