"""``GenerationRequest``: what the caller asks for, kept as given (``tier=None`` stays ``None``: what was set and
what the profile filled in stay apart); backends translate its resolved form (:mod:`.resolve`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .precision import Precision
from .presets import DEFAULT_PROFILE, DEFAULT_SEED, MODE_ALIASES
from .prompts import PromptLike
from .resolve import IMAGE_MODES, MAX_GUIDANCE, MAX_STEPS, MediaLike, ResolvedRequest, resolve
from .step_cache import StepCache

# Names other modules import from here (their homes are resolve.py and presets.py).
__all__ = ["GenerationRequest", "ResolvedRequest", "IMAGE_MODES", "MAX_GUIDANCE", "MAX_STEPS", "MODE_ALIASES"]


@dataclass(frozen=True, eq=False)
class GenerationRequest:
    """What to generate, independent of where it runs, as the caller gave it.

    Building one checks everything (a mistake raises :class:`~cosmos_helpers.errors.ValidationError` naming the
    field and the fix, here rather than once a model is loading); :meth:`resolve` gives the values to run.

    Args:
        mode: ``text2image``, ``text2video``, ``image2video``, ``video2video`` (``t2i``/``t2v``/``i2v``/``v2v``),
            ``image2image`` (``i2i``: without a tier, aspect ratio or size the edit keeps the input's shape, longer
            side 512, as in the framework), ``forward_dynamics``, ``inverse_dynamics``, ``policy`` (fd, id, wam).
        prompt: text, a structured caption dict, or a ``pathlib.Path`` to a ``.json``/``.txt`` file (a ``str`` is
            always the prompt itself).
        negative_prompt: the same forms; ``None`` keeps each backend's own default.
        profile: ``tiny`` (default, embedded model), ``nano``, ``super``, ``edge``, ``super-t2i-4step``,
            ``super-i2v-4step``, ``tiny-distilled``, ``tiny-edge`` (``presets.PROFILES``): the model and, per mode,
            every omitted setting below; it refuses what its checkpoint cannot do (``cosmos_helpers.limits``).
        model: another model than the profile's (hub id, local folder, or ``"tiny"``); every backend runs it or refuses.
        tier / aspect_ratio: a resolution bucket (``"480"``, ``"16,9"``); or give ``width`` and ``height``.
        num_frames: 1 for images, ``4k+1`` for video (the causal VAE's constraint).
        fps: frame rate; it conditions the model (mRoPE, duration metadata), not only playback.
        num_inference_steps, guidance_scale, flow_shift: sampling settings.
        seed: always recorded; the default is fixed so reruns reproduce.
        sound: generate a 48 kHz stereo soundtrack with the video.
        image / video: the conditioning image (path, PIL image or HxWx3 array) or video (path or TxHxWx3 array).
        condition_frames / condition_video_keep: which latent frames of ``video`` stay clean, from which end.
        use_system_prompt: Cosmos3's built-in system prompt.
        add_resolution_template / add_duration_template: append the sentence templates to a *plain-text* prompt.
        guidance_interval: ``(lo, hi)`` timesteps (0-1000) inside which classifier-free guidance applies.
        guardrails: run the Cosmos guardrails; ``None`` takes the profile's choice.
        actions: the trajectory ``forward_dynamics`` plays, ``(num_frames - 1, D)``: an array, nested lists or a file
            (:mod:`cosmos_helpers.trajectories`); it sets ``num_frames`` when that is left out.
        embodiment: whose actions (``protocol.action.RAW_DIM``: ``"av"``, ...); it fixes ``D`` and the action weights.
        view_point: the camera's viewpoint sentence of the action caption (``"ego_view"``, ...).
        step_cache: ``None``, ``"off"``, or ``SeaCache(...)`` / ``"sea"`` (:mod:`cosmos_helpers.step_cache`).
        precision: ``None`` (bf16), ``"fp8"`` / ``FP8(...)``, ``"mxfp8"``, ``"nvfp4"`` (:mod:`.precision`).

    ``None`` for a backend option (negative prompt, condition frames, system prompt, templates, guidance interval,
    view point, step cache, precision) keeps that backend's own default (vLLM-Omni guides images in ``(400, 1000)``);
    ``step_cache`` and ``precision`` change the pictures, so they are in the fingerprint.
    Action modes (``forward_dynamics``, ``inverse_dynamics``, ``policy``) take ``image`` (the start frame) or, for
    inverse dynamics, ``video``; their size comes from that media and ``tier`` (an action tier: 256, 480, 704, 720).
    """

    mode: str
    prompt: PromptLike
    negative_prompt: PromptLike | None = None
    profile: str = DEFAULT_PROFILE
    model: str | None = None
    tier: str | None = None
    aspect_ratio: str | None = None
    width: int | None = None
    height: int | None = None
    num_frames: int | None = None
    fps: float | None = None
    num_inference_steps: int | None = None
    guidance_scale: float | None = None
    flow_shift: float | None = None
    seed: int = DEFAULT_SEED
    sound: bool = False
    image: MediaLike | None = None
    video: MediaLike | None = None
    condition_frames: tuple[int, ...] | None = None
    condition_video_keep: str | None = None
    use_system_prompt: bool | None = None
    add_resolution_template: bool | None = None
    add_duration_template: bool | None = None
    guidance_interval: tuple[float, float] | None = None
    guardrails: bool | None = None
    actions: Any = None
    embodiment: str | None = None
    view_point: str | None = None
    step_cache: StepCache = None
    precision: Precision = None

    def __post_init__(self) -> None:
        # Resolved once, here: a mistake fails before any model loads, and a caption file or an image is read once.
        object.__setattr__(self, "_resolved", resolve(self))

    def resolve(self) -> ResolvedRequest:
        """What this request asks for, every value concrete (the profile's defaults for what was left out)."""
        return self._resolved

    def replace(self, **changes: Any) -> "GenerationRequest":
        """A new request with some values changed, checked again (``dataclasses.replace``)."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:  # the manifest's record; fingerprint() and summary() also of resolve()
        return self._resolved.to_dict()

    def fingerprint(self) -> str:
        return self._resolved.fingerprint()

    def summary(self) -> str:
        return self._resolved.summary()
