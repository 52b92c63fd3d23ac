"""Step caching on the framework backend: a request's step cache becomes the real CLI's own flags (checked against the
framework's ``--help`` and its code, ``tests/contracts/fixtures``), the manifest says what ran, and the stand-in models
the CLI's cache (on by default) with diffusers' hooks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cosmos_helpers import FrameworkBackend, GenerationRequest, SeaCache
from cosmos_helpers.errors import FrameworkRunError, OutputExistsError, ValidationError
from cosmos_helpers.protocol import step_cache as facts
from cosmos_helpers.standins.framework_cli.cli import standin_cache
from cosmos_helpers.standins.framework_cli.cli import build_parser

from ..contracts.conftest import load

REAL_FLAGS = set(load("cosmos_framework")["cli_flags"])
STEP_CACHE = load("step_cache")["framework"]


def _image(**changes) -> GenerationRequest:
    """A still at the framework's smallest tier; 12 steps leave the tiny model's SeaCache passes to skip."""
    return GenerationRequest(mode="text2image", prompt="A red ball on a grey floor.", profile="tiny", tier="256",
                             num_inference_steps=12, seed=1, **changes)


def _flags(backend: FrameworkBackend, step_cache) -> list[str]:
    command = backend.command("in.json", "out", model="nvidia/Cosmos3-Nano", guardrails=False, step_cache=step_cache)
    return command[command.index("--no-guardrails") + 1:]


def test_each_choice_is_the_clis_own_flags(tmp_path):
    backend = FrameworkBackend(tmp_path, python="/opt/fw/bin/python")
    assert _flags(backend, None) == []  # the CLI's own default: SeaCache on
    assert _flags(backend, "off") == ["--no-diffusion-cache"]
    assert _flags(backend, SeaCache()) == ["--diffusion-cache"]
    assert _flags(backend, SeaCache(threshold=0.2, residual_order=2)) == [
        "--diffusion-cache", "--diffusion-cache-thresh", "0.2", "--diffusion-cache-residual-order", "2"]
    # a field with no flag, asked at the framework's own value, needs none
    assert _flags(backend, SeaCache(max_consecutive=0, power_exp=3.0)) == ["--diffusion-cache"]
    for flags in (_flags(backend, "off"), _flags(backend, SeaCache(threshold=0.2, residual_order=2))):
        assert {f for f in flags if f.startswith("--")} <= REAL_FLAGS
    # each flag sets the Config key of the field it stands for (inference.py _maybe_install_diffusion_cache)
    assert STEP_CACHE["config_keys"] == {"diffusion_cache_thresh": "diffusion_cache_thresh",
                                         "diffusion_cache_residual_order": "residual_order"}


@pytest.mark.parametrize(("cache", "field"), [(SeaCache(max_consecutive=2), "step_cache.max_consecutive"),
                                              (SeaCache(retention_steps=2), "step_cache.retention_steps"),
                                              (SeaCache(power_exp=2.0), "step_cache.power_exp")])
def test_a_field_the_framework_has_no_flag_for_is_refused_before_anything_is_written(tmp_path, cache, field):
    backend = FrameworkBackend(tmp_path, python=sys.executable, work_dir=tmp_path / "runs", progress=False)
    with pytest.raises(ValidationError) as caught:
        backend.generate(GenerationRequest(mode="text2image", prompt="p", profile="nano", tier="256",
                                           step_cache=cache))
    assert caught.value.field == field and "framework" in str(caught.value) and caught.value.fix
    with pytest.raises(ValidationError):
        backend.generate_many([_image(step_cache="off").replace(profile="nano"),
                               _image(step_cache=cache).replace(profile="nano")], names=["a", "b"])
    assert not (tmp_path / "runs").exists()


def test_the_cache_flags_are_the_requests_not_the_backends(tmp_path):
    for flag in ("--no-diffusion-cache", "--diffusion-cache-thresh=0.5"):
        with pytest.raises(ValidationError) as caught:
            FrameworkBackend(tmp_path, extra_args=(flag,))
        assert caught.value.field == "extra_args" and "step_cache" in caught.value.fix


def test_the_standins_cache_follows_the_clis_flags():
    parse = build_parser().parse_args
    base = ["-i", "x.json", "-o", "out"]
    assert standin_cache(parse(base)) == SeaCache(**facts.FRAMEWORK_DEFAULTS)  # on by default: 0.35, no limit
    assert standin_cache(parse(base)).max_consecutive == 0 and STEP_CACHE["cli_setup"] == {"diffusion_cache": True}
    assert standin_cache(parse([*base, "--no-diffusion-cache"])) == "off"
    chosen = standin_cache(parse([*base, "--diffusion-cache", "--diffusion-cache-thresh", "0.2",
                                  "--diffusion-cache-residual-order", "0"]))
    assert (chosen.threshold, chosen.residual_order, chosen.max_consecutive) == (0.2, 0, 0)


def test_the_standin_refuses_an_order_it_cannot_run_with_an_error_line(tmp_path):
    """The real CLI takes residual order 2; diffusers' hooks run 0 or 1, so the stand-in says so, and runs nothing."""
    sample = tmp_path / "s.json"
    sample.write_text(json.dumps({"prompt": "p", "model_mode": "text2image"}))
    done = subprocess.run([sys.executable, "-m", "cosmos_helpers.standins.framework_cli", "-i", str(sample), "-o",
                           str(tmp_path / "out"), "--diffusion-cache-residual-order", "2"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1
    assert "ERROR: ValidationError: --diffusion-cache-residual-order: 2: the stand-in runs diffusers' SeaCache" in \
        done.stdout
    assert not (tmp_path / "out").exists()
    backend = FrameworkBackend.standin(work_dir=tmp_path / "runs", progress=False)
    with pytest.raises(ValidationError, match="stand-in runs diffusers' SeaCache"):  # refused before a run
        backend.generate(_image(step_cache=SeaCache(residual_order=2)))
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_requests_with_other_caches_run_as_one_framework_run_each_and_say_what_ran(tmp_path):
    """The stand-in caches by default as the CLI does, and runs every pass with --no-diffusion-cache: on today's
    stand-in, which ignored the flag, both computed every pass."""
    backend = FrameworkBackend.standin(work_dir=tmp_path / "runs", progress=False)
    requests = [_image(), _image(step_cache="off"), _image().replace(seed=2)]
    default, off, other = backend.generate_many(requests, names=["default", "off", "other"])
    folders = sorted((tmp_path / "runs").iterdir())
    assert len(folders) == 2  # one framework run per cache setting, the defaults together
    commands = sorted((folder / "command.txt").read_text() for folder in folders)
    assert sum("--no-diffusion-cache" in c for c in commands) == 1 and not any("--diffusion-cache " in c
                                                                               for c in commands)
    assert [g.request for g in (default, off, other)] == [r.resolve() for r in requests]  # in the order asked
    for cached in (default, other):
        record = cached.provenance["step_cache"]
        assert record["source"] == "framework default: on: SeaCache 0.35" and record["method"] == "sea_cache"
        assert record["values"]["threshold"] == 0.35 and record["values"]["max_consecutive"] == 0
        assert 0 < record["passes_computed"] < record["passes"] == 24
    assert off.provenance["step_cache"]["choice"] == "off" and off.provenance["step_cache"]["passes_computed"] == 24
    assert not np.array_equal(default.frames, off.frames)
    log = (Path(default.provenance["run_folder"]) / "run.log").read_text()
    assert f"diffusion cache on (threshold 0.35, residual order 1, no limit on skips in a row): computed " \
           f"{default.provenance['step_cache']['passes_computed']} of 24 guidance passes" in log
    assert default.manifest()["provenance"]["step_cache"]["passes"] == 24


@pytest.mark.slow
def test_a_spec_runs_with_the_runs_cache_and_an_action_only_pack_bypasses_it(tmp_path):
    """``run_spec(step_cache=)`` on the framework: the flags on its command line, the choice in the fingerprint.
    Inverse dynamics denoises actions only (the video is given), so the cache runs every pass, as the framework's
    does for packs without noisy vision."""
    from cosmos_helpers import media
    from cosmos_helpers.samples import render_drive, sample_trajectory
    from cosmos_helpers.transfer.runner import run_spec

    backend = FrameworkBackend.standin(work_dir=tmp_path / "runs", progress=False)
    sample = {"name": "still", "model_mode": "text2image", "prompt": "A red ball on a grey floor.",
              "resolution": "256", "num_steps": 12, "seed": 3}
    cached = run_spec(sample, backend=backend, profile="tiny", out=tmp_path / "out",
                      step_cache=SeaCache(threshold=0.5))
    assert "--diffusion-cache --diffusion-cache-thresh 0.5" in cached.provenance["command"]
    record = json.loads((tmp_path / "out" / "still" / "vision.json").read_text())
    assert record["request"]["step_cache"] == {"sea_cache": {"threshold": 0.5}}
    assert 0 < record["provenance"]["step_cache"]["passes_computed"] < record["provenance"]["step_cache"]["passes"]
    with pytest.raises(OutputExistsError, match="different run"):  # an uncached run is another output, not this
        run_spec(sample, backend=backend, profile="tiny", out=tmp_path / "out", step_cache="off")
    trajectory = sample_trajectory("av", 8)
    drive = tmp_path / "drive.mp4"
    media.write_mp4(drive, render_drive(trajectory, 64, 48), 10)
    inverse = {"name": "inverse", "model_mode": "inverse_dynamics", "prompt": "Drive ahead.", "domain_name": "av",
               "action_chunk_size": 8, "image_size": 256, "fps": 10, "num_steps": 12, "seed": 0,
               "vision_path": str(drive)}
    actions = run_spec(inverse, backend=backend, profile="tiny", out=tmp_path / "out")
    record = actions.provenance["step_cache"]
    assert record["method"] == "sea_cache" and record["passes_computed"] == record["passes"] > 0


def test_the_standin_without_its_record_is_an_error(tmp_path):
    from cosmos_helpers.backends.framework_run import standin_record

    with pytest.raises(FrameworkRunError, match="standin.json"):
        standin_record(tmp_path)


def test_an_audio_sample_needs_the_cache_off_on_the_standin(tmp_path):
    """The framework caches audio_image2video; the stand-in's experimental loop cannot, so with its default (on) it
    says so before any model loads, and names the flag."""
    assets = Path(__file__).resolve().parents[2] / "cookbooks/cosmos3/generator/transfer/assets"
    sample = tmp_path / "audio.json"
    sample.write_text(json.dumps({"model_mode": "audio_image2video", "prompt": "a ball", "fps": 24, "num_frames": 9,
                                  "vision_path": str(assets / "images/rolling_ball_first_frame.png"),
                                  "sound_path": str(assets / "sounds/chime.wav"), "resolution": "256"}))
    done = subprocess.run([sys.executable, "-m", "cosmos_helpers.standins.framework_cli", "-i", str(sample), "-o",
                           str(tmp_path / "out"), "--checkpoint-path", "tiny", "--no-guardrails"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "ERROR: ValidationError: --diffusion-cache: the stand-in's experimental" in \
        done.stdout and "--no-diffusion-cache" in done.stdout
