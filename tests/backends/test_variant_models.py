"""The variants' tiny stand-ins on the backends: the few-step path held to diffusers' own distilled blocks, the
framework stand-in running a 4-step checkpoint, and the Edge backbone."""

from __future__ import annotations

import numpy as np
import pytest

from cosmos_helpers import DiffusersBackend, GenerationRequest
from cosmos_helpers.errors import ValidationError
from cosmos_helpers.protocol import variants

T2I = GenerationRequest(mode="t2i", prompt="a red cube on a table", profile="tiny-distilled", seed=3)


@pytest.fixture(scope="module")
def t2i(tiny_backend):
    steps: list[tuple[int, int]] = []
    generation = tiny_backend.generate(T2I, progress=lambda done, total: steps.append((done, total)))
    return generation, steps


def test_text2image_runs_the_published_schedule_with_progress(t2i):
    generation, steps = t2i
    assert generation.frames.shape == (1, 128, 128, 3) and generation.frames.dtype == np.uint8
    assert steps == [(1, 4), (2, 4), (3, 4), (4, 4)]
    expected = [round(s * 1000, 3) for s in variants.DISTILLED_T_LIST]  # shift 1: the sigmas as they are
    assert generation.provenance["timesteps"] == expected and generation.provenance["distilled"]
    assert generation.provenance["scheduler"] == variants.DISTILLED_SCHEDULER
    assert generation.sound is None and generation.model == "tiny-distilled"


def test_the_same_seed_gives_the_same_picture_through_the_stochastic_sampler(tiny_backend, t2i):
    again = tiny_backend.generate(T2I)
    assert np.array_equal(again.frames, t2i[0].frames)
    assert not np.array_equal(tiny_backend.generate(T2I.replace(seed=4)).frames, t2i[0].frames)


def test_image2video_makes_a_clip_from_the_image(tiny_backend, rgb_image):
    request = GenerationRequest(mode="i2v", prompt="the cube slides", profile="tiny-distilled", image=rgb_image)
    generation = tiny_backend.generate(request)
    assert generation.frames.shape == (9, 96, 160, 3)


def test_the_real_blocks_refuse_what_the_request_refuses(tiny_backend, t2i):
    """The oracle: diffusers' Cosmos3DistilledBlocks raise for another step count or guidance (our request
    refuses both before loading); the same call with the fixed values runs."""
    from cosmos_helpers.backends.diffusers.distilled import call_kwargs

    pipe = tiny_backend.pipeline("tiny-distilled")
    kwargs = call_kwargs(T2I.resolve())
    for wrong in ({"num_inference_steps": 8}, {"guidance_scale": 4.0}):
        with pytest.raises(ValueError, match="distilled checkpoint"):
            pipe(**{**kwargs, **wrong}, output="videos", output_type="np")


@pytest.mark.parametrize("changes, field", [
    ({"profile": "tiny", "model": "tiny-distilled"}, "model"),  # a base profile's guidance on a distilled model
    ({"profile": "tiny-distilled", "model": "tiny"}, "model"),  # a fixed schedule asked of a base model
])
def test_mismatched_profile_and_model_are_refused_before_loading(tiny_backend, changes, field):
    with pytest.raises(ValidationError) as caught:
        tiny_backend.generate(GenerationRequest(mode="t2i", prompt="p", **changes))
    assert caught.value.field == field and caught.value.fix


@pytest.mark.parametrize("option", [{"fast": True}, {"scheduler": object()}])
def test_backend_options_the_distilled_pipeline_cannot_take_are_refused(option):
    with pytest.raises(ValidationError) as caught:
        DiffusersBackend(progress=False, **option).generate(T2I)
    assert caught.value.field == next(iter(option))


@pytest.mark.slow
def test_the_framework_stand_in_runs_a_4step_checkpoint_on_its_fixed_schedule(tmp_path):
    """FrameworkBackend end to end: the input file names the 4-step checkpoint; the stand-in runs the tiny
    distilled weights on the fixed schedule, as the framework runs the real checkpoint."""
    from pathlib import Path

    from cosmos_helpers import FrameworkBackend

    backend = FrameworkBackend.standin(work_dir=tmp_path / "runs", progress=False)
    request = GenerationRequest(mode="t2i", prompt="a red cube", profile="super-t2i-4step", tier="256",
                                guardrails=False)
    generation = backend.generate(request)
    assert generation.frames.shape == (1, 256, 256, 3)
    assert "--checkpoint-path Cosmos3-Super-Text2Image-4Step" in generation.provenance["command"]
    log = (Path(generation.provenance["run_folder"]) / "run.log").read_text()
    assert "step 4/4" in log and "step 5/" not in log


def test_tiny_edge_runs_the_nemotron_dense_backbone_without_a_sound_pathway(tiny_backend):
    from cosmos_helpers.models.tiny_edge import EDGE_TRANSFORMER

    generation = tiny_backend.generate(GenerationRequest(mode="t2v", prompt="a robot", profile="tiny-edge"))
    assert generation.frames.shape == (9, 96, 160, 3) and generation.sound is None
    pipe = tiny_backend.pipeline("tiny-edge")
    assert pipe.transformer.config.hidden_act == EDGE_TRANSFORMER["hidden_act"] == "relu2"
    assert not pipe.transformer.config.sound_gen and pipe.sound_tokenizer is None
