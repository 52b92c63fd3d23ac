"""How :class:`~cosmos_helpers.backends.diffusers.DiffusersBackend` runs a framework input sample: a generation or
action sample as its request, a transfer through the diffusers transfer, ``audio_image2video`` through the
experimental loop; and each output saved as the framework saves it (:func:`framework_file`)."""

from __future__ import annotations

from typing import Any

from ... import media
from ...errors import ValidationError
from ...protocol import action as ap
from ...protocol import framework as fw
from ...result import FinishedFile, Generation
from ...schedules import configure_scheduler
from ...specs.resolve import ResolvedSample
from ...specs.runs import SampleRun, SampleSupport, generation_request
from ...step_cache import StepCache, check_for_backend
from .distilled import is_distilled_model

NAME = "diffusers"
SUPPORT = SampleSupport(transfer=True, sound_conditioning=True, action_domains=ap.DIFFUSERS_RAW_DIM,
                        always_shares_positions=True)


def check_cache(step_cache: StepCache, r: ResolvedSample) -> None:
    """A run's step cache: SeaCache's hooks, which the experimental sound-conditioned loop does not have."""
    if step_cache is None:
        return
    check_for_backend(step_cache, NAME)
    if r.model_mode in fw.SOUND_CONDITION_MODES:
        raise ValidationError("step_cache", f"the experimental {r.model_mode} loop on diffusers runs every step: it "
                              "has no step cache.", "leave step_cache out (--step-cache), or run the sample on the "
                              "framework.")


def check_scheduler(scheduler: Any, r: ResolvedSample, given: set[str]) -> None:
    """A scheduler instance given to the backend, against the sample, before any work. Transfer and audio samples
    run the framework's own sampler here (it would be left unused while the manifest named it); a generation
    sample sends its shift, the framework's default where it sets none, which the instance must share."""
    if scheduler is None:
        return
    if r.is_transfer or r.model_mode in fw.SOUND_CONDITION_MODES:
        raise ValidationError("scheduler", f"a {r.model_mode} sample runs the framework's own sampler (flow UniPC "
                              "at the sample's shift) on diffusers; the backend's scheduler would not be used.",
                              "run it on a DiffusersBackend made without scheduler=.")
    if isinstance(scheduler, type) or is_distilled_model(r.model):
        return  # a class takes the sample's shift; the distilled path refuses any scheduler itself
    try:
        configure_scheduler({}, scheduler, r.shift, shift_given=True)
    except ValidationError as error:
        if error.field != "flow_shift":
            raise
        whose = "the sample's shift" if "shift" in given else "the framework's default shift for this sample"
        raise ValidationError("shift", f"{whose} is {r.shift:g}, and the backend's scheduler instance was built "
                              "with another.", "set shift in the sample to the scheduler's, or build the "
                              "scheduler with this shift.") from None


def run_sample(backend: Any, run: SampleRun, progress: Any) -> Generation:
    """The output of a checked sample run on ``backend`` (a callable ``progress`` gets the steps), as the framework
    saves it."""
    r = run.resolved
    if r.is_transfer:
        from .transfer import run_transfer  # OpenCV and the modular blocks load on first use

        return framework_file(run_transfer(r, backend=backend, progress=progress, step_cache=run.step_cache), r)
    if r.model_mode in fw.SOUND_CONDITION_MODES:
        from .audio import run_audio_sample  # scipy and the sound tokenizer load on first use

        return framework_file(run_audio_sample(r, backend=backend, progress=progress), r)
    request = generation_request(r, run.given, run.step_cache)
    return framework_file(backend.generate(request, progress=progress if callable(progress) else None), r)


def framework_file(generation: Generation, r: ResolvedSample) -> Generation:
    """Save an in-process result as the framework saves it: ``vision.jpg`` at ``image_save_quality``, ``vision.mp4``
    at the CRF its ``video_save_quality`` gives (``protocol.framework.video_crf``)."""
    if generation.is_image:
        data = media.image_bytes(generation.frames[0], "JPEG", quality=r.image_save_quality)
        generation.finished = FinishedFile(".jpg", data=data)
    else:
        generation.crf = fw.video_crf(r.video_save_quality)
    return generation
