"""Transfer on diffusers (tiny model, fp32, CPU): geometry, chunking, weighted multi-control, schedule, guidance
gating, progress, and that a call leaves the shared pipeline as it found it."""

from __future__ import annotations

import numpy as np
import pytest

from cosmos_helpers import DiffusersBackend, media
from cosmos_helpers.samples import rolling_ball_clip
from cosmos_helpers.specs import Sample
from cosmos_helpers.transfer import edge_map

STEPS = 2


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("transfer_media")
    clip = rolling_ball_clip(13, 160, 90)
    media.write_mp4(folder / "rgb.mp4", clip, 24)
    media.write_mp4(folder / "rgb9.mp4", clip[:9], 24)
    media.write_mp4(folder / "edge9.mp4", edge_map(rolling_ball_clip(9, 160, 96)), 24)
    # a 4:3 "depth" control without an RGB clip: geometry must come from the control itself
    yy, xx = np.mgrid[0:48, 0:64]
    depth = np.stack([np.repeat(((xx + 3 * t) % 64 * 4).astype(np.uint8)[..., None], 3, -1) for t in range(5)])
    media.write_mp4(folder / "depth.mp4", depth, 10)
    return folder


def resolved(folder, **fields):
    data = {"prompt": "a red ball rolls on a checkered floor", "seed": 3, "num_steps": STEPS,
            "num_video_frames_per_chunk": 9, **fields}
    return Sample.from_dict(data, base_dir=folder, name="t").resolved(profile="tiny")


def run(folder, **fields):
    from cosmos_helpers.backends.diffusers.transfer import run_transfer

    return run_transfer(resolved(folder, **fields), backend=DiffusersBackend(progress=False), progress=False)


@pytest.mark.slow
def test_control_longer_than_one_chunk_gives_two_chunks_and_the_full_length(clip_dir):
    from cosmos_helpers.backends.diffusers.transfer import run_transfer

    steps = []
    out = run_transfer(resolved(clip_dir, vision_path="rgb.mp4", edge={}, num_frames=13),
                       backend=DiffusersBackend(progress=False),
                       progress=lambda done, total: steps.append((done, total)))
    assert out.frames.shape == (13, 96, 160, 3) and out.frames.dtype == np.uint8
    assert out.fps == 24.0 and out.seed == 3 and out.backend == "diffusers"
    assert out.provenance["chunks"] == [[0, 9], [8, 13]] and out.provenance["chunk_frames"] == 9
    assert steps == [(1, 4), (2, 4), (3, 4), (4, 4)]  # 2 chunks x 2 steps
    assert out.provenance["transformer_passes_per_step"] == [3]  # edge tuned: guidance 3, control_guidance 1.5
    assert set(out.controls) == {"edge"} and out.controls["edge"].shape == (13, 96, 160, 3)
    assert np.array_equal(out.controls["edge"], edge_map(out.input_frames))  # computed on the cropped RGB
    prompt = out.provenance["prompt"]
    assert "96x160 resolution" in prompt and prompt.endswith("with the edge signal at every frame.")


def test_geometry_comes_from_the_control_without_vision_path(clip_dir):
    out = run(clip_dir, depth={"control_path": "depth.mp4"}, aspect_ratio="4,3", num_frames=5, fps=10, guidance=1.0,
              control_guidance=1.0, num_video_frames_per_chunk=5)
    assert out.frames.shape == (5, 128, 160, 3)  # tier 128, 4:3 detected from the 64x48 control, cover + crop
    assert out.fps == 10.0 and out.provenance["transformer_passes_per_step"] == [1]


def _pair(clip_dir, weights, same_file=False):
    common = dict(vision_path="rgb9.mp4", num_frames=9, guidance=3.0, control_guidance=1.5,
                  emphasize_control_in_prompt=False)
    single = run(clip_dir, edge={"control_path": "edge9.mp4"}, **common)
    blur = {"control_path": "edge9.mp4"} if same_file else {}
    double = run(clip_dir, edge={"control_path": "edge9.mp4", "weight": weights[0]},
                 blur={**blur, "weight": weights[1]}, **common)
    return single, double


def test_weights_one_zero_give_exactly_the_single_control_result(clip_dir):
    single, double = _pair(clip_dir, [1.0, 0.0])
    assert double.provenance["weights"] == [1.0, 0.0]
    assert np.array_equal(single.frames, double.frames)


def test_duplicated_control_at_half_weights_equals_the_single_control(clip_dir):
    single, double = _pair(clip_dir, [0.5, 0.5], same_file=True)
    assert np.array_equal(single.frames, double.frames)


def test_weights_matter_and_the_shared_pipeline_is_left_as_it_was(clip_dir):
    from diffusers.models.transformers.transformer_cosmos3 import Cosmos3AttnProcessor

    from cosmos_helpers import DiffusersBackend

    base = DiffusersBackend(progress=False).pipeline("tiny")
    scheduler, config = base.scheduler, dict(base.scheduler.config)
    single, double = _pair(clip_dir, [0.3, 0.7])
    assert not np.array_equal(single.frames, double.frames)
    assert all(type(p) is Cosmos3AttnProcessor for p in base.transformer.attn_processors.values())
    assert base.scheduler is scheduler and dict(base.scheduler.config) == config  # the transfer's is its own


def test_native_flow_schedule_with_the_sample_shift():
    from cosmos_helpers.models.tiny import SCHEDULER_CONFIG
    from cosmos_helpers.schedules import native_flow_scheduler

    scheduler = native_flow_scheduler(SCHEDULER_CONFIG, 10.0)
    scheduler.set_timesteps(35)
    timesteps = scheduler.timesteps.tolist()
    assert timesteps[:3] == [999, 996, 993] and timesteps[-1] == 227 and len(timesteps) == 35


def test_strict_guidance_intervals_switch_passes_off(clip_dir):
    out = run(clip_dir, vision_path="rgb9.mp4", edge={}, num_frames=9, guidance_interval=[0, 1],
              control_guidance_interval=[0, 1])
    assert out.provenance["transformer_passes_per_step"] == [1]


def test_progress_in_a_static_run_reports_chunks(clip_dir, monkeypatch, capsys):
    """What ``run-cookbooks`` (papermill) sees: one plain summary line naming the last chunk."""
    from cosmos_helpers.backends.diffusers.transfer import run_transfer

    monkeypatch.delenv("COSMOS_HELPERS_NO_PROGRESS", raising=False)
    monkeypatch.setenv("COSMOS_HELPERS_STATIC", "1")
    run_transfer(resolved(clip_dir, vision_path="rgb.mp4", edge={}, num_frames=13), backend=DiffusersBackend(),
                 progress=True)
    assert "transfer chunk 2/2: 4/4 step in " in capsys.readouterr().out


def test_the_samples_guardrails_run_on_the_transfer(clip_dir, tmp_path):
    """Guardrails are the sample's (decided when resolving): asked for here, they run (and, without
    ``cosmos_guardrail`` on this machine, fail saying how to install them), and nothing is written."""
    from cosmos_helpers.errors import BackendUnavailableError
    from cosmos_helpers.transfer.runner import run_spec

    spec = {"name": "guarded", "prompt": "p", "vision_path": str(clip_dir / "rgb9.mp4"), "edge": {}, "seed": 1,
            "num_steps": 1, "num_video_frames_per_chunk": 9}
    with pytest.raises(BackendUnavailableError, match="cosmos_guardrail"):
        run_spec(spec, profile="tiny", guardrails=True, out=tmp_path / "out", progress=False)
    assert not (tmp_path / "out" / "guarded").exists()
