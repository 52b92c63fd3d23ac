"""``cosmos-helpers run`` (and its alias ``transfer``): a framework input file runs unchanged on diffusers and over
vLLM-Omni (the local server with the transfer hook); explicit values win over the profile; reruns skip finished
work and never mistake another input's output for it; every sample of a file runs; errors are one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cosmos_helpers import media
from cosmos_helpers.cli import main
from cosmos_helpers.samples import rolling_ball_clip


def write_input(folder: Path, data, name: str = "blur.json") -> Path:
    path = folder / "specs" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def blur_input(folder: Path) -> Path:
    media.write_mp4(folder / "rgb.mp4", rolling_ball_clip(9, 160, 90), 24)
    return write_input(folder, {"name": "blur_run", "prompt": "a red ball", "vision_path": "../rgb.mp4",
                                "blur": {"preset_blur_strength": "low"}, "seed": 4, "num_steps": 1,
                                "num_video_frames_per_chunk": 9})


def printed(capsys) -> Path:
    return Path(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.slow
def test_diffusers_and_vllm_omni_run_the_same_file(tmp_path, capsys):
    from cosmos_helpers.standins.vllm_omni.local import ThreadedServer
    from cosmos_helpers.standins.vllm_omni.transfer import make_transfer_runner

    spec = blur_input(tmp_path)
    args = ["run", "--input", str(spec), "--resolution", "256"]  # a tier vLLM-Omni knows
    assert main([*args, "--out", str(tmp_path / "local")]) == 0
    local = printed(capsys)
    assert local == tmp_path / "local" / "blur_run" / "vision.mp4"
    assert (local.parent / "control_blur.mp4").is_file() and local.with_suffix(".json").is_file()
    with ThreadedServer(model="tiny", warmup=False, transfer_runner=make_transfer_runner("tiny"),
                        storage_dir=tmp_path / "server") as server:
        code = main([*args, "--backend", "vllm-omni", "--url", server.url, "--out", str(tmp_path / "served")])
        assert code == 0
        served = printed(capsys)
        still = write_input(tmp_path, {"name": "still", "model_mode": "text2image", "prompt": "a robot"}, "still.json")
        assert main(["run", "--input", str(still), "--backend", "vllm-omni", "--url", server.url, "--steps", "1",
                     "--out", str(tmp_path / "served")]) == 0
        image = printed(capsys)  # a generation sample: a GenerationRequest, the server's own file kept as it came
        assert image.parent.name == "still" and media.read_image(image).shape == (128, 128, 3)
    a, b = media.read_video(local).frames, media.read_video(served).frames
    assert a.shape == b.shape == (9, 192, 320, 3)
    assert np.abs(a.astype(int) - b.astype(int)).mean() < 8  # the same frames through two H.264 encoders
    manifest = json.loads(served.with_suffix(".json").read_text())
    assert manifest["backend"] == "vllm-omni" and manifest["as_delivered"]


@pytest.mark.slow
def test_an_explicit_resolution_wins_over_the_profile(tmp_path, capsys):
    spec = blur_input(tmp_path)
    assert main(["transfer", "--spec", str(spec), "--profile", "tiny", "--resolution", "256",
                 "--out", str(tmp_path / "out")]) == 0
    assert media.read_video(printed(capsys)).frames.shape == (9, 192, 320, 3)  # not tiny's 160x96


def test_the_profile_never_caps_what_the_file_sets(tmp_path, capsys):
    spec = write_input(tmp_path, {"name": "still", "model_mode": "text2image", "prompt": "a robot", "num_steps": 6},
                       "still.json")
    assert main(["run", "--input", str(spec), "--out", str(tmp_path / "out")]) == 0
    manifest = json.loads(printed(capsys).with_suffix(".json").read_text())
    assert manifest["request"]["num_steps"] == 6 and manifest["request"]["resolution"] == "128"  # tiny: 4 steps


def test_a_rerun_skips_and_a_changed_input_is_not_mistaken_for_it(tmp_path, capsys):
    spec = blur_input(tmp_path)
    out = ["--out", str(tmp_path / "out")]
    assert main(["run", "--input", str(spec), *out]) == 0
    first = printed(capsys)
    original = (first.stat().st_ino, first.read_bytes())  # a published file is a new inode (atomic rename)
    assert main(["run", "--input", str(spec), *out]) == 0
    captured = capsys.readouterr()
    assert "blur_run: already done" in captured.err and (first.stat().st_ino, first.read_bytes()) == original
    media.write_mp4(tmp_path / "rgb.mp4", rolling_ball_clip(9, 160, 90, seed=8), 24, overwrite=True)  # same name
    assert main(["run", "--input", str(spec), *out]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "different run" in err and (first.stat().st_ino, first.read_bytes()) == original
    assert main(["run", "--input", str(spec), *out, "--overwrite"]) == 0
    assert first.stat().st_ino != original[0]


def test_control_files_are_named_in_the_manifest_and_never_silently_replaced(tmp_path, capsys):
    spec = blur_input(tmp_path)
    out = tmp_path / "out" / "blur_run"
    out.mkdir(parents=True)
    foreign = media.write_mp4(out / "control_blur.mp4", rolling_ball_clip(3, 64, 48), 24)  # another run's
    before = foreign.read_bytes()
    assert main(["run", "--input", str(spec), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "control_blur.mp4 already exists" in err and "overwrite" in err
    assert foreign.read_bytes() == before and not (out / "vision.mp4").exists()  # refused before any work
    assert main(["run", "--input", str(spec), "--out", str(tmp_path / "out"), "--overwrite"]) == 0
    manifest = json.loads(printed(capsys).with_suffix(".json").read_text())
    assert manifest["provenance"]["control_files"] == {"blur": "control_blur.mp4"}
    assert media.read_video(out / "control_blur.mp4").frames.shape == (9, 96, 160, 3)  # the map it followed


def test_profile_choices_guardrails_and_dry_run(tmp_path, capsys):
    from cosmos_helpers.presets import DEFAULT_PROFILE, PROFILES

    still = write_input(tmp_path, {"name": "still", "model_mode": "text2image", "prompt": "a robot"}, "still.json")
    with pytest.raises(SystemExit) as unknown:
        main(["run", "--input", str(still), "--profile", "huge"])
    err = capsys.readouterr().err
    assert unknown.value.code == 2 and all(name in err for name in PROFILES)
    assert main(["run", "--input", str(still), "--guardrails", "--out", str(tmp_path / "out")]) == 1
    assert "cosmos_guardrail" in capsys.readouterr().err  # asked for explicitly: run (and here, not installed)
    assert main(["run", "--input", str(still), "--dry-run", "--out", str(tmp_path / "out")]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert (plan["profile"], plan["guardrails"], plan["resolution"]) == (DEFAULT_PROFILE, False, "128")
    assert not (tmp_path / "out").exists()  # nothing ran


def test_every_sample_of_a_jsonl_file_runs(tmp_path, capsys):
    lines = [{"model_mode": "text2image", "prompt": "a robot"}, {"model_mode": "text2image", "prompt": "a dog"}]
    spec = write_input(tmp_path, "\n".join(json.dumps(x) for x in lines), "batch.jsonl")
    assert main(["run", "--input", str(spec), "--out", str(tmp_path / "out"), "--steps", "1"]) == 0
    paths = [Path(line) for line in capsys.readouterr().out.split()]
    assert paths == [tmp_path / "out" / f"batch_{i}" / "vision.jpg" for i in (0, 1)]
    assert all(media.read_image(p).shape == (128, 128, 3) for p in paths)


def test_errors_are_one_line(tmp_path, capsys):
    spec = blur_input(tmp_path)
    assert main(["run", "--input", str(spec), "--backend", "framework"]) == 1
    assert "--checkout" in capsys.readouterr().err
    assert main(["run", "--input", str(spec), "--backend", "framework", "--checkout", str(tmp_path / "nowhere"),
                 "--profile", "nano", "--out", str(tmp_path / "fw")]) == 1
    assert "git clone https://github.com/NVIDIA/cosmos-framework" in capsys.readouterr().err
    assert main(["run", "--input", str(spec), "--backend", "framework", "--checkout", str(tmp_path)]) == 1
    assert "tiny model" in capsys.readouterr().err  # profile tiny: refused before launch
    assert main(["run", "--input", str(spec), "--backend", "vllm-omni"]) == 1
    assert "--url" in capsys.readouterr().err
    for data, field in (({"prompt": "p", "depth": {}}, "depth.control_path"), ({"prompt": "p", "guidence": 3},
                                                                               "did you mean 'guidance'")):
        assert main(["run", "--input", str(write_input(tmp_path, data, "bad.json"))]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and field in err


def test_spec_runner_is_run_spec_with_one_backend_and_folder(tmp_path):
    from cosmos_helpers.transfer import SpecRunner

    spec = write_input(tmp_path, {"model_mode": "text2image", "prompt": "a robot", "num_steps": 1}, "still.json")
    with SpecRunner("diffusers", output_dir=tmp_path / "out", progress=False) as runner:
        generation = runner.run(spec)
        again = runner.run(spec)
    assert generation.paths["media"] == tmp_path / "out" / "still" / "vision.jpg" and again.provenance["skipped"]
    from cosmos_helpers.gallery import list_outputs

    assert [row["name"] for row in list_outputs(tmp_path / "out", display=False)] == ["still/vision.jpg"]


@pytest.mark.slow
def test_spec_runner_starts_a_local_vllm_omni_server_that_reads_further_controls_by_path(tmp_path):
    from cosmos_helpers.transfer import SpecRunner, edge_map

    clip = rolling_ball_clip(9, 160, 90)
    media.write_mp4(tmp_path / "edge.mp4", edge_map(clip), 24)
    media.write_mp4(tmp_path / "depth.mp4", clip, 24)
    spec = write_input(tmp_path, {"name": "two", "prompt": "a ball", "seed": 1, "num_steps": 1, "guidance": 3.0,
                                  "edge": {"control_path": "../edge.mp4"}, "depth": {"control_path": "../depth.mp4"},
                                  "num_video_frames_per_chunk": 9}, "two.json")
    runner = SpecRunner("vllm-omni", output_dir=tmp_path / "out", overrides={"resolution": "256"}, progress=False)
    with runner:
        generation = runner.run(spec)
    assert generation.backend == "vllm-omni" and generation.frames.shape == (9, 192, 320, 3)
    assert json.loads(generation.provenance["form"]["extra_params"])["depth"]["control_path"] == str(
        tmp_path / "depth.mp4")  # the second control: a path on the (same-machine) server


def test_spec_runner_builds_its_backend_by_name_and_checks_it_now(tmp_path):
    from cosmos_helpers.errors import ValidationError
    from cosmos_helpers.transfer import SpecRunner

    with pytest.raises(ValidationError) as no_checkout:
        SpecRunner("framework", output_dir=tmp_path)  # the one "needs a checkout" error (backends.backend_by_name)
    assert no_checkout.value.field == "checkout" and "--checkout" in no_checkout.value.fix
    with pytest.raises(ValidationError) as unknown:
        SpecRunner("comfy", output_dir=tmp_path)
    assert unknown.value.field == "backend"
    from cosmos_helpers.backends import NAMES, backend_by_name

    assert all(name in unknown.value.fix for name in NAMES)
    # what the chosen backend cannot use is refused, not dropped; gpus reaches the diffusers backend
    for name, options, field in (("diffusers", dict(url="http://localhost:8000"), "url"),
                                 ("vllm-omni", dict(url="http://localhost:8000", checkout=tmp_path), "checkout"),
                                 ("vllm-omni", dict(url="http://localhost:8000", gpus=2), "gpus")):
        with pytest.raises(ValidationError) as refused:
            backend_by_name(name, **options)
        assert refused.value.field == field and refused.value.fix
    assert backend_by_name("diffusers", gpus=2, progress=False).plan.gpus == 2


def test_the_step_cache_of_a_run_on_every_backend(tmp_path, capsys):
    """``--step-cache``: the framework's flags on its command line, diffusers' hooks in process (and in the
    fingerprint: a cached output never serves an uncached rerun), refused on vLLM-Omni, whose server holds it."""
    still = write_input(tmp_path, {"name": "still", "model_mode": "text2image", "prompt": "a robot", "num_steps": 12,
                                   "seed": 2}, "still.json")
    fw = ["run", "--input", str(still), "--backend", "framework", "--checkout", str(tmp_path), "--profile", "nano",
          "--no-guardrails", "--dry-run", "--out", str(tmp_path / "fw")]
    for choice, flags in (("off", ["--no-diffusion-cache"]), (None, []),
                          ("sea:0.5", ["--diffusion-cache", "--diffusion-cache-thresh", "0.5"])):
        assert main(fw + (["--step-cache", choice] if choice else [])) == 0
        command = capsys.readouterr().err.split()  # the dry run's command line
        assert command[command.index("--no-guardrails") + 1:] == flags
    out = tmp_path / "out"
    assert main(["run", "--input", str(still), "--out", str(out), "--step-cache", "sea:0.5"]) == 0
    manifest = json.loads(printed(capsys).with_suffix(".json").read_text())
    assert manifest["request"]["step_cache"] == {"sea_cache": {"threshold": 0.5}}
    record = manifest["provenance"]["step_cache"]
    assert record["choice"] == "sea_cache" and 0 < record["passes_computed"] < record["passes"]
    assert main(["run", "--input", str(still), "--out", str(out)]) == 1  # uncached: another output, refused
    assert "different run" in capsys.readouterr().err
    assert main(["run", "--input", str(still), "--backend", "vllm-omni", "--url", "http://127.0.0.1:9",
                 "--step-cache", "sea", "--out", str(tmp_path / "served")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "step_cache" in err and "serve_command" in err
