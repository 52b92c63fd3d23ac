"""Audio-conditioned generation (the framework's ``model_mode: "audio_image2video"``) on diffusers. EXPERIMENTAL.

There is no "audio" control hint: Cosmos3 generates video *conditioned on a sound clip* (the ts2v / ti2sv
sequence plan) next to an optional conditioning image. This module does what the framework's
``inference/sound.py`` documents:

1. load the clip (WAV through ``soundfile`` or ``scipy.io.wavfile``; any other file, e.g. the audio track of a
   video, through PyAV), as float32 ``(channels, samples)``;
2. resample to 48 kHz with ``scipy.signal.resample_poly`` (up/down by their gcd), mono -> stereo by duplication
   (more than two channels are averaged first), trim or zero-pad to ``int(num_frames / fps * 48000)`` samples;
3. encode with the pipeline's audio tokenizer (``Cosmos3AVAEAudioTokenizer.encode``, 25 latents per second);
4. pack the sound latents as **clean** tokens (no timestep embedding, zero predicted velocity, never stepped)
   beside the image conditioning (latent frame 0 clean), and denoise only the video.

EXPERIMENTAL: the packing (sound mRoPE offsets, the negative pass keeping the audio, latent scaling) follows
diffusers' own sound segment and is **not verified against the framework**; the published checkpoint's audio
tokenizer may ship without encoder weights (then :func:`encode_audio` explains and fails). The loop is our
own (~100 lines) because ``Cosmos3OmniPipeline`` only *generates* sound.
"""

from __future__ import annotations

import math
import os
import random
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from cosmos_helpers import media
from cosmos_helpers.errors import BackendUnavailableError, ValidationError
from cosmos_helpers.presets import SOUND_SAMPLE_RATE, TIERS, VIDEO_SIZES, get_profile, normalize_tier
from cosmos_helpers.result import Generation

WAV_EXTENSIONS = frozenset({".wav", ".wave"})
EXPERIMENTAL_NOTE = ("EXPERIMENTAL: audio-conditioned generation on diffusers packs the clip as clean sound tokens; "
                     "the packing is not verified against the Cosmos Framework.")


# ---------------------------------------------------------------------------------------------- audio I/O


def load_audio_clip(path: str | os.PathLike[str]) -> tuple[np.ndarray, int]:
    """Read a sound clip as float32 ``(channels, samples)`` in [-1, 1] and its sample rate.

    WAV files are read with ``soundfile`` (or ``scipy.io.wavfile`` when soundfile is missing); anything else
    (MP3/AAC/FLAC, or the audio track of an MP4) is decoded with PyAV.
    """
    path = Path(path)
    if not path.is_file():
        raise ValidationError("sound_path", f"file not found: {path}.", "fix the path (relative to the spec).")
    if path.suffix.lower() in WAV_EXTENSIONS:
        try:
            import soundfile

            data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
            return np.ascontiguousarray(data.T), int(rate)
        except ImportError:
            from scipy.io import wavfile

            rate, data = wavfile.read(str(path))
            data = np.asarray(data)
            if np.issubdtype(data.dtype, np.integer):
                data = data.astype(np.float32) / float(np.iinfo(data.dtype).max)
            data = data.astype(np.float32)
            data = data[:, None] if data.ndim == 1 else data
            return np.ascontiguousarray(data.T), int(rate)
    try:
        sound, rate = media.read_audio(path)
    except Exception as exc:  # av errors
        raise ValidationError("sound_path", f"cannot decode audio from {path}: {exc}.", "use a WAV file.") from exc
    if sound is None:
        raise ValidationError("sound_path", f"{path} has no audio stream.", "use a WAV file or a video with sound.")
    return sound.astype(np.float32), int(rate)


def conform_audio(samples: np.ndarray, sample_rate: int, num_frames: int, fps: float,
                  target_rate: int = SOUND_SAMPLE_RATE) -> np.ndarray:
    """Resample to ``target_rate``, make stereo, trim or zero-pad to ``int(num_frames / fps * target_rate)``.

    Returns float32 ``(2, N)``. Resampling is ``scipy.signal.resample_poly(up, down)`` with
    ``up/down = target/source`` reduced by their gcd, as the framework does.
    """
    from scipy.signal import resample_poly

    audio = np.asarray(samples, dtype=np.float32)
    audio = audio[None] if audio.ndim == 1 else audio
    if audio.ndim != 2 or audio.shape[1] == 0:
        raise ValidationError("sound", f"expected (channels, samples) audio, got shape {audio.shape}.",
                              "pass a non-empty clip.")
    if sample_rate != target_rate:
        divisor = math.gcd(int(target_rate), int(sample_rate))
        audio = resample_poly(audio, target_rate // divisor, int(sample_rate) // divisor, axis=1).astype(np.float32)
    if audio.shape[0] > 2:
        audio = audio.mean(axis=0, keepdims=True)
    if audio.shape[0] == 1:
        audio = np.repeat(audio, 2, axis=0)
    length = int(num_frames / fps * target_rate)
    if audio.shape[1] >= length:
        return np.ascontiguousarray(audio[:, :length])
    return np.pad(audio, ((0, 0), (0, length - audio.shape[1])))


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
    padded = math.ceil(wave.shape[1] / hop) * hop
    if padded != wave.shape[1]:
        wave = np.pad(wave, ((0, 0), (0, padded - wave.shape[1])))
    param = next(tokenizer.parameters())
    with torch.no_grad():
        dist = tokenizer.encode(torch.from_numpy(wave)[None].to(device=param.device, dtype=param.dtype)).latent_dist
    return dist.mean[0].float()


# ---------------------------------------------------------------------------------------------- generation


def generate_with_audio(
    prompt: str,
    sound: np.ndarray | str | os.PathLike[str],
    *,
    image: Any = None,
    negative_prompt: str | None = None,
    sample_rate: int | None = None,
    width: int = 160,
    height: int = 96,
    num_frames: int = 9,
    fps: float = 24.0,
    num_steps: int = 4,
    guidance: float = 6.0,
    shift: float = 10.0,
    seed: int = 0,
    model: str = "tiny",
    device: str | None = None,
    dtype: Any = None,
    templates: bool = False,
    progress: bool | Callable[[int, int], None] = True,
) -> Generation:
    """EXPERIMENTAL. Generate a video conditioned on a sound clip (and optionally a first-frame image).

    ``prompt``/``negative_prompt`` are tokenised as given (pass ``templates=True`` to append diffusers' duration
    and resolution sentences). ``sound`` is a path or float ``(channels, samples)`` at ``sample_rate``. The result's
    ``sound`` is the conditioning clip as used (48 kHz stereo, trimmed/padded), so the saved MP4 carries it.
    """
    import torch

    from cosmos_helpers.backends.diffusers import DiffusersBackend
    from cosmos_helpers.transfer.diffusers_transfer import native_flow_scheduler

    if (num_frames - 1) % 4 or num_frames < 1:
        raise ValidationError("num_frames", f"{num_frames} is not 4k+1.", "use e.g. 9, 17 or 189.")
    started = time.perf_counter()
    if isinstance(sound, (str, os.PathLike)):
        samples, sample_rate = load_audio_clip(sound)
    else:
        if sample_rate is None:
            raise ValidationError("sample_rate", "raw samples need their sample rate.", "pass sample_rate=48000.")
        samples = np.asarray(sound, dtype=np.float32)
    waveform = conform_audio(samples, int(sample_rate), num_frames, fps)
    pipe = DiffusersBackend(model, device=device, dtype=dtype, progress=False).pipeline()
    load_s = time.perf_counter() - started
    exec_device = pipe._get_execution_device()
    model_dtype = pipe.transformer.dtype
    scheduler = native_flow_scheduler(pipe.scheduler.config, shift)
    generator = torch.Generator("cpu").manual_seed(int(seed))
    pil = None
    if image is not None:
        frame = media.cover_crop(np.asarray(media.load_image(image))[None], width, height)[0]
        pil = media.load_image(frame)
    call_start = time.perf_counter()
    marks: list[float] = []
    from cosmos_helpers.progress import progress_bar

    bar = progress_bar(num_steps, "audio->video (experimental)", "step", enabled=progress is True)
    try:
        with torch.inference_mode():
            cond_ids, uncond_ids = pipe.tokenize_prompt(
                prompt, negative_prompt, num_frames=num_frames, height=height, width=width, fps=fps,
                use_system_prompt=True, add_resolution_template=templates, add_duration_template=templates)
            latents, _noise_sound, _, fps_vision, fps_sound, vision_mask, _, *_rest = pipe.prepare_latents(
                image=pil, num_frames=num_frames, height=height, width=width, fps=fps, generator=generator,
                device=exec_device, dtype=torch.float32, enable_sound=True)
            sound_latents = encode_audio(pipe, waveform).to(exec_device)
            expected = _noise_sound.shape
            if tuple(sound_latents.shape) != tuple(expected):
                fixed = torch.zeros(expected, dtype=sound_latents.dtype, device=sound_latents.device)
                n = min(expected[1], sound_latents.shape[1])
                fixed[:, :n] = sound_latents[: expected[0], :n]
                sound_latents = fixed
            condition = [int(i) for i in torch.nonzero(vision_mask[:, 0, 0] > 0).flatten()]
            packs = [_pack(pipe, ids, latents, sound_latents, condition, fps_vision, fps_sound, exec_device)
                     for ids in (cond_ids, uncond_ids)]
            scheduler.set_timesteps(num_steps, device=exec_device)
            noisy = 1.0 - vision_mask
            pinned = vision_mask * latents
            sound_tokens = sound_latents.to(model_dtype)
            for i, t in enumerate(scheduler.timesteps):
                timesteps = torch.full((packs[0]["num_noisy_vision_tokens"],), t.item(), device=exec_device)
                velocities = []
                for pack in packs[: 2 if guidance != 1.0 else 1]:
                    preds, _, _ = pipe.transformer(
                        input_ids=pack["input_ids"], text_indexes=pack["text_indexes"],
                        position_ids=pack["position_ids"], und_len=pack["und_len"],
                        sequence_length=pack["sequence_length"], vision_tokens=[latents.to(model_dtype)],
                        vision_token_shapes=pack["vision_token_shapes"],
                        vision_sequence_indexes=pack["vision_sequence_indexes"],
                        vision_mse_loss_indexes=pack["vision_mse_loss_indexes"], vision_timesteps=timesteps,
                        vision_noisy_frame_indexes=pack["vision_noisy_frame_indexes"], sound_tokens=[sound_tokens],
                        sound_token_shapes=pack["sound_token_shapes"],
                        sound_sequence_indexes=pack["sound_sequence_indexes"],
                        sound_mse_loss_indexes=pack["sound_mse_loss_indexes"],
                        sound_timesteps=torch.zeros(0, device=exec_device),
                        sound_noisy_frame_indexes=pack["sound_noisy_frame_indexes"], return_dict=False)
                    velocities.append(preds[0].float() * noisy)
                velocity = velocities[0] if len(velocities) == 1 else (
                    velocities[1] + guidance * (velocities[0] - velocities[1]))
                latents = scheduler.step(velocity.unsqueeze(0), t, latents.unsqueeze(0), return_dict=False)[0]
                latents = latents.squeeze(0)
                latents = noisy * latents + pinned  # re-pin the image frame exactly
                marks.append(time.perf_counter())
                if bar is not None:
                    bar.update(1)
                if callable(progress):
                    progress(i + 1, num_steps)
            video = _decode(pipe, latents)
    finally:
        if bar is not None:
            bar.close()
    end = time.perf_counter()
    frames = media.to_uint8(video)
    timings = {"load_s": load_s, "total_s": end - started, "pipeline_s": end - call_start}
    if marks:
        timings["denoise_s"] = marks[-1] - call_start
        timings["decode_s"] = end - marks[-1]
    return Generation(
        frames=frames, fps=float(fps), seed=int(seed), sound=waveform, sample_rate=SOUND_SAMPLE_RATE,
        backend="diffusers", model=str(model), timings=timings,
        provenance={"workflow": "audio_image2video", "experimental": EXPERIMENTAL_NOTE, "prompt": prompt,
                    "negative_prompt": negative_prompt, "num_steps": num_steps, "guidance": guidance, "shift": shift,
                    "sound_latent_frames": int(sound_latents.shape[1]), "image_conditioned": pil is not None,
                    "scheduler": "NativeFlowUniPCScheduler", "device": str(exec_device)},
    )


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


def run_audio_spec(
    spec: Any,
    *,
    model: str | None = None,
    profile: str | None = "tiny",
    resolution: str | int | None = None,
    num_steps: int | None = None,
    seed: int | None = None,
    device: str | None = None,
    dtype: Any = None,
    progress: bool | Callable[[int, int], None] = True,
) -> Generation:
    """EXPERIMENTAL. Run a framework ``audio_image2video`` spec (``sound_path`` + image ``vision_path``) on diffusers.

    Prompts get the framework's metadata (JSON captions) or sentence templates (plain text), like every
    framework mode. With ``profile="tiny"`` the CPU tier and the profile's steps apply unless given.
    """
    from cosmos_helpers.transfer.diffusers_transfer import _coerce_spec, profile_overrides
    from cosmos_helpers.transfer.controls import read_video
    from cosmos_helpers.transfer.spec import format_transfer_prompt

    source = _coerce_spec(spec)
    source.validate(tiers=TIERS)
    r = source.resolved()
    if r.model_mode != "audio_image2video":
        raise ValidationError("model_mode", f"expected audio_image2video, got {r.model_mode}.",
                              'set "model_mode": "audio_image2video".')
    model = model or (get_profile(profile).model if profile else "tiny")
    resolution, num_steps, cap = profile_overrides(profile, resolution, num_steps)
    if num_steps is None and cap:
        num_steps = min(r.num_steps, cap)
    tier = normalize_tier(resolution) if resolution is not None else r.resolution
    width, height = VIDEO_SIZES[tier][r.aspect_ratio]
    num_frames = r.num_frames
    if (num_frames - 1) % 4:
        num_frames = (num_frames - 1) // 4 * 4 + 5
    image = None
    if r.vision_path is not None:
        image = read_video(r.vision_path, max_frames=1)[0][0]
    prompt, negative = format_transfer_prompt(r.prompt, r.negative_prompt, r, width, height, num_frames, r.fps)
    if seed is None:
        seed = r.seed if r.seed is not None else random.randint(0, 10000)
    generation = generate_with_audio(
        prompt, r.sound_path, image=image, negative_prompt=negative, width=width, height=height,
        num_frames=num_frames, fps=float(r.fps), num_steps=int(num_steps or r.num_steps), guidance=r.guidance,
        shift=r.shift, seed=int(seed), model=model, device=device, dtype=dtype, progress=progress)
    generation.provenance["spec"] = source.to_dict()
    return generation


__all__ = [
    "EXPERIMENTAL_NOTE",
    "conform_audio",
    "encode_audio",
    "generate_with_audio",
    "load_audio_clip",
    "run_audio_spec",
]
