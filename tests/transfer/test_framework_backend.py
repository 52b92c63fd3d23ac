"""FrameworkBackend against the framework's contract (``tests/contracts/fixtures``): its command line, the model
from the request, the sample a request becomes (validated by the framework's own schema; unset fields left
unset), what it refuses, and runs collected by the framework's output layout through the STAND-IN program
(``cosmos_helpers.standins.framework_cli``, which speaks the CLI's contract, not the framework)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import jsonschema
import pytest

from cosmos_helpers import GenerationRequest, media
from cosmos_helpers.backends.framework import FrameworkBackend, checkpoint_for, request_payload
from cosmos_helpers.errors import BackendUnavailableError, FrameworkRunError, ValidationError
from cosmos_helpers.protocol import framework as fw
from cosmos_helpers.samples import rolling_ball_clip
from cosmos_helpers.transfer.runner import plan_spec, run_spec

from ..contracts.conftest import load

CONTRACT = load("cosmos_framework")
SCHEMA = fw.sample_overrides_schema()


def standin(tmp_path) -> FrameworkBackend:
    return FrameworkBackend.standin(work_dir=tmp_path / "runs", progress=False)


def fake_framework(tmp_path) -> FrameworkBackend:
    """A checkout whose "framework" leaves a mark when it is launched, and fails."""
    checkout = tmp_path / "checkout"
    (checkout / "fake_fw").mkdir(parents=True)
    (checkout / "fake_fw" / "__init__.py").write_text("")
    (checkout / "fake_fw" / "__main__.py").write_text(
        "import pathlib, sys\npathlib.Path('launched').write_text(' '.join(sys.argv))\nsys.exit(3)\n")
    return FrameworkBackend(checkout, python=sys.executable, module="fake_fw", work_dir=tmp_path / "runs",
                            progress=False)


def test_command_line_uses_the_frameworks_flags(tmp_path, monkeypatch):
    backend = FrameworkBackend(tmp_path, python="/opt/fw/bin/python", extra_args=("--sampler", "edm"))
    cmd = backend.command("in.json", "out", model="nvidia/Cosmos3-Nano", guardrails=False,
                          overrides={"seed": 7, "num_steps": None}, step_cache="off")
    assert cmd == ["/opt/fw/bin/python", "-m", "cosmos_framework.scripts.inference", "-i", "in.json", "-o", "out",
                   "--checkpoint-path", "Cosmos3-Nano", "--seed", "7", "--no-guardrails", "--no-diffusion-cache",
                   "--sampler", "edm"]
    assert {"--sampler", "--no-diffusion-cache"} <= set(CONTRACT["cli_flags"])
    multi = FrameworkBackend(tmp_path, python="/opt/fw/bin/python", gpus=4, parallelism_preset="throughput")
    cmd = multi.command("in.json", "out", model="nvidia/Cosmos3-Super", guardrails=True,
                        overrides={"resolution": "480"})
    assert cmd[:6] == ["/opt/fw/bin/python", "-m", "torch.distributed.run", "--nproc-per-node", "4", "-m"]
    flags = [arg for arg in cmd[6:] if arg.startswith("-")]
    assert set(flags) <= set(CONTRACT["cli_flags"])
    assert cmd[cmd.index("--parallelism-preset") + 1] in CONTRACT["cli_choices"]["--parallelism-preset"]
    assert cmd[cmd.index("--resolution") + 1] == "480" and cmd[cmd.index("--checkpoint-path") + 1] == "Cosmos3-Super"
    assert "--guardrails" in flags  # said, never left to the framework's default
    with pytest.raises(ValidationError, match="CPU tier") as tier:
        backend.command("in.json", "out", model="nvidia/Cosmos3-Nano", guardrails=False,
                        overrides={"resolution": "128"})
    assert tier.value.field == "resolution"
    monkeypatch.setenv("COSMOS_FRAMEWORK_PYTHON", "/env/python")
    assert FrameworkBackend(tmp_path).python == "/env/python"


def test_the_model_comes_from_the_request(tmp_path):
    for name, hub in CONTRACT["checkpoints"].items():
        assert checkpoint_for(hub) == name and checkpoint_for(name) == name
    assert checkpoint_for(str(tmp_path)) == str(tmp_path.resolve())
    with pytest.raises(ValidationError, match="tiny model") as tiny:
        checkpoint_for("tiny")
    assert tiny.value.field == "model" and "profile 'nano'" in tiny.value.fix
    with pytest.raises(ValidationError, match="neither a framework checkpoint"):
        checkpoint_for("someone/Other-Model")
    with pytest.raises(ValidationError, match="GenerationRequest") as ctor:
        FrameworkBackend(tmp_path, checkpoint="Cosmos3-Super")
    assert ctor.value.field == "checkpoint"


def test_the_guardrails_come_from_the_request(tmp_path):
    """No backend setting can contradict the request: the request's choice (None: its profile's) is always said."""
    with pytest.raises(ValidationError, match="GenerationRequest") as ctor:
        FrameworkBackend(tmp_path, guardrails=False)
    assert ctor.value.field == "guardrails"
    backend = fake_framework(tmp_path)
    base = GenerationRequest(mode="t2i", prompt="a robot", profile="nano", num_inference_steps=1)
    for request, name, flag, other in ((base, "on", "--guardrails", "--no-guardrails"),
                                       (base.replace(guardrails=False), "off", "--no-guardrails", "--guardrails")):
        with pytest.raises(FrameworkRunError, match="exited with code 3"):
            backend.generate(request, name=name)
        (folder,) = (tmp_path / "runs").glob(f"*-{name}")
        command = (folder / "command.txt").read_text().split()
        assert flag in command and other not in command and flag in CONTRACT["cli_flags"]


def test_options_the_framework_cannot_honour_are_refused_before_anything_runs(tmp_path):
    backend = fake_framework(tmp_path)
    base = GenerationRequest(mode="t2v", prompt="a robot", profile="nano")
    for change, field in ((dict(use_system_prompt=True), "use_system_prompt"),
                          (dict(use_system_prompt=False), "use_system_prompt"),
                          (dict(add_resolution_template=False), "add_resolution_template"),
                          (dict(add_duration_template=False), "add_duration_template")):
        with pytest.raises(ValidationError) as refused:
            backend.generate(base.replace(**change))
        assert refused.value.field == field and field in str(refused.value) and refused.value.fix
    assert not (tmp_path / "runs").exists() and not (backend.checkout / "launched").exists()


def test_missing_framework_explains_how_to_install(tmp_path):
    with pytest.raises(BackendUnavailableError, match="git clone https://github.com/NVIDIA/cosmos-framework"):
        FrameworkBackend(tmp_path / "nowhere").check_available()
    with pytest.raises(BackendUnavailableError, match="cannot import cosmos_framework.scripts.inference"):
        FrameworkBackend(tmp_path, python=sys.executable).check_available()


def test_failing_run_raises_with_the_log_tail(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / "fake_fw").mkdir(parents=True)
    (checkout / "fake_fw" / "__init__.py").write_text("")
    (checkout / "fake_fw" / "__main__.py").write_text(
        "import sys\nprint('step 1/35')\nprint('CUDA out of memory in layer 12', file=sys.stderr)\nsys.exit(3)\n")
    backend = FrameworkBackend(checkout, python=sys.executable, module="fake_fw", progress=False)
    run = backend.prepare({"name": "x", "prompt": "p"}, name="x", model="nvidia/Cosmos3-Nano", guardrails=False)
    with pytest.raises(FrameworkRunError, match="(?s)exited with code 3.*CUDA out of memory in layer 12"):
        backend.launch(run)


# ---------------------------------------------------------------------------------------------- requests


def payload(request: GenerationRequest, tmp_path) -> dict:
    data = request_payload(request, name="x", image_dir=tmp_path)
    jsonschema.validate(data, SCHEMA)  # the framework's own OmniSampleOverrides schema
    return data


def test_a_request_leaves_what_it_leaves_unset_unset(tmp_path):
    request = GenerationRequest(mode="t2v", prompt={"subject": "a robot"}, profile="nano", seed=5)
    data = payload(request, tmp_path)
    assert "negative_prompt" not in data  # the framework's default: its neg_prompts.json caption
    assert not {"enable_sound", "guidance_interval", "duration_template", "condition_frame_indexes_vision"} & set(data)
    assert data == {"name": "x", "model_mode": "text2video", "prompt": '{"subject": "a robot"}', "resolution": "720",
                    "aspect_ratio": "16,9", "fps": 24, "num_steps": 35, "guidance": 6.0, "shift": 10.0, "seed": 5,
                    "num_frames": 189}
    explicit = payload(request.replace(negative_prompt="blurry", sound=True), tmp_path)
    assert explicit["negative_prompt"] == "blurry" and explicit["enable_sound"] is True
    image = payload(GenerationRequest(mode="t2i", prompt="a robot", profile="nano"), tmp_path)
    assert "num_frames" not in image and (image["resolution"], image["aspect_ratio"]) == ("720", "1,1")


def test_only_framework_buckets_and_integer_fps(tmp_path):
    with pytest.raises(ValidationError, match="buckets only") as size:
        payload(GenerationRequest(mode="t2v", prompt="p", profile="nano", width=1024, height=576), tmp_path)
    assert size.value.field == "width"
    assert payload(GenerationRequest(mode="t2v", prompt="p", profile="nano", width=832, height=480), tmp_path)[
        "resolution"] == "480"  # an explicit size that is a bucket
    with pytest.raises(ValidationError, match="CPU tier") as tier:
        payload(GenerationRequest(mode="t2v", prompt="p", profile="tiny"), tmp_path)
    assert tier.value.field == "tier"
    with pytest.raises(ValidationError, match="integer") as fps:
        payload(GenerationRequest(mode="t2v", prompt="p", profile="nano", fps=29.97), tmp_path)
    assert fps.value.field == "fps"


def test_options_the_framework_cannot_honour_are_refused(tmp_path):
    base = GenerationRequest(mode="t2v", prompt="a robot", profile="nano")
    for change, field in ((dict(use_system_prompt=True), "use_system_prompt"),
                          (dict(add_resolution_template=False), "add_resolution_template")):
        with pytest.raises(ValidationError) as refused:
            payload(base.replace(**change), tmp_path)
        assert refused.value.field == field and refused.value.fix
    assert "duration_template" not in payload(base.replace(add_duration_template=True), tmp_path)  # its default


def test_guidance_interval_becomes_the_frameworks_strict_interval(tmp_path):
    data = payload(GenerationRequest(mode="t2i", prompt="p", profile="nano", guidance_interval=(400, 1000)), tmp_path)
    lo, hi = data["guidance_interval"]
    assert lo < 400 < hi and 1000 < hi  # strict (lo, hi) holding exactly the inclusive [400, 1000]
    assert (lo, hi) == (math.nextafter(400.0, 0), math.nextafter(1000.0, math.inf))


def test_video2video_requests_run_on_the_framework(tmp_path):
    request = GenerationRequest(mode="v2v", prompt="p", profile="nano", video=rolling_ball_clip(9, 64, 48),
                                condition_frames=(0,))
    data = payload(request, tmp_path)
    assert data["model_mode"] == "video2video" and data["condition_frame_indexes_vision"] == [0]
    assert media.read_video(data["vision_path"]).frames.shape == (9, 48, 64, 3)


# ---------------------------------------------------------------------------------------------- runs


def test_an_unseeded_sample_gets_the_seed_the_framework_derives(tmp_path):
    from cosmos_helpers.protocol import framework as fw

    backend = FrameworkBackend(tmp_path, python=sys.executable, work_dir=tmp_path / "runs")
    run = backend.prepare({"prompt": "p"}, name="s", model="nvidia/Cosmos3-Nano", guardrails=True)
    assert run.seed == fw.fallback_seed("s", (run.out_dir / "s").absolute())  # inference.py _fallback_seed
    seeded = backend.prepare({"prompt": "p", "seed": 3}, name="s", model="nvidia/Cosmos3-Nano", guardrails=True,
                             overrides={"seed": 9})
    assert seeded.seed == 9 and seeded.command[-3:-1] == ("--seed", "9")


def test_tiny_is_refused_on_the_framework_before_anything_is_written(tmp_path):
    backend = FrameworkBackend(tmp_path, python=sys.executable, work_dir=tmp_path / "runs", progress=False)
    with pytest.raises(ValidationError, match="tiny model"):
        run_spec({"prompt": "p", "model_mode": "text2image"}, backend=backend, profile="tiny", out=tmp_path / "out")
    assert not (tmp_path / "runs").exists() and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_standin_runs_from_any_folder_and_says_what_really_ran(tmp_path, monkeypatch):
    """No checkout, no repository on the path: the stand-in ships with the package. It takes the tiny model under its
    own name, and the manifest and the gallery say a stand-in made the output, and with which model."""
    from cosmos_helpers import generate_and_save
    from cosmos_helpers.gallery import write_gallery

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    backend = FrameworkBackend.standin(progress=False)
    assert backend.checkout is None and backend.work_dir == elsewhere / "outputs" / "cosmos_helpers"
    request = GenerationRequest(mode="text2image", prompt="A red ball on a grey floor.", profile="tiny", tier="256",
                                num_inference_steps=1, seed=1)
    generation = generate_and_save(backend, request, tmp_path / "out" / "still")
    assert "--checkpoint-path tiny" in generation.provenance["command"]
    manifest = json.loads((tmp_path / "out" / "still.json").read_text())
    assert manifest["backend"] == "framework" and manifest["model"] == "tiny"
    said = {"of": "framework", "version": fw.VERSION, "checkpoint": "tiny", "model_run": "tiny",
            "program": "cosmos_helpers.standins.framework_cli"}
    assert {k: v for k, v in manifest["standin"].items() if k != "step_cache"} == said
    assert "framework (stand-in)" in repr(generation)
    again = generate_and_save(backend, request, tmp_path / "out" / "still")  # a rerun on the stand-in: skipped
    assert again.provenance["skipped"] and again.standin == manifest["standin"]
    page = write_gallery(tmp_path / "out", convert_notebooks=False).read_text()
    assert "<td>framework (stand-in)</td><td>tiny</td>" in page


@pytest.mark.slow
def test_a_standins_output_never_passes_for_the_real_frameworks(tmp_path):
    """A Nano request the stand-in ran (on the tiny weights) is not finished work for the real framework."""
    from cosmos_helpers import generate_and_save
    from cosmos_helpers.errors import OutputExistsError

    request = _small("text2image").replace(num_inference_steps=1)
    made = generate_and_save(standin(tmp_path), request, tmp_path / "out" / "still")
    assert made.model == "tiny" and made.standin["checkpoint"] == "Cosmos3-Nano" and made.standin["model_run"] == "tiny"
    real = FrameworkBackend(tmp_path, python=sys.executable, work_dir=tmp_path / "real", progress=False)
    with pytest.raises(OutputExistsError, match="other framework settings"):
        generate_and_save(real, request, tmp_path / "out" / "still")
    assert not (tmp_path / "real").exists()


def test_the_standins_flags_are_the_real_clis():
    from cosmos_helpers.standins.framework_cli.cli import build_parser

    flags = {option for action in build_parser()._actions for option in action.option_strings}
    assert flags <= set(CONTRACT["cli_flags"]), flags - set(CONTRACT["cli_flags"])


def test_the_standin_rejects_unknown_fields_as_the_framework_does(tmp_path):
    backend = standin(tmp_path)
    run = backend.prepare({"name": "bad", "prompt": "p", "edge": {"weightt": 1}}, name="bad",
                          model="nvidia/Cosmos3-Nano", guardrails=False)
    with pytest.raises(FrameworkRunError, match="ERROR: ValidationError: Additional properties"):
        backend.launch(run)
    assert "NOT the NVIDIA Cosmos Framework" in (run.folder / "run.log").read_text()


@pytest.mark.slow
def test_an_image_sample_comes_back_as_the_frameworks_vision_jpg(tmp_path):
    sample = {"name": "still", "model_mode": "text2image", "prompt": "a robot", "resolution": "256", "num_steps": 1,
              "seed": 4}
    generation = run_spec(sample, backend=standin(tmp_path), profile="nano", guardrails=False, out=tmp_path / "out")
    produced = Path(generation.provenance["output"])
    assert produced.name == "vision.jpg" and produced.parent.name == "still"  # <out>/<name>/vision.jpg
    saved = tmp_path / "out" / "still" / "vision.jpg"
    assert generation.paths["media"] == saved and saved.read_bytes() == produced.read_bytes()  # as delivered
    assert generation.frames.shape == (1, 256, 256, 3) and generation.backend == "framework"
    manifest = json.loads(saved.with_suffix(".json").read_text())
    assert manifest["as_delivered"] and manifest["request"]["input"] == sample


@pytest.mark.slow
def test_an_edit_request_runs_through_the_framework_at_the_frameworks_edit_size(tmp_path):
    still = rolling_ball_clip(1, 64, 48)[0]
    request = GenerationRequest(mode="i2i", prompt="Paint the ball blue.", image=still, profile="nano",
                                num_inference_steps=2, guardrails=False, seed=5)
    generation = standin(tmp_path).generate(request)
    assert Path(generation.provenance["output"]).name == "vision.jpg"
    assert generation.frames.shape == (1, 384, 512, 3)  # no resolution sent: the input's shape, longer side 512
    (sample_file,) = (tmp_path / "runs").glob("*/image2image_*.json")
    sample = json.loads(sample_file.read_text())
    assert sample["model_mode"] == "image2image" and "resolution" not in sample


@pytest.mark.slow
def test_a_transfer_sample_runs_unchanged_and_its_controls_are_collected(tmp_path):
    media.write_mp4(tmp_path / "rgb.mp4", rolling_ball_clip(9, 320, 180), 24)
    sample = {"name": "edge_run", "prompt": "a red ball", "vision_path": "rgb.mp4", "edge": {}, "seed": 2,
              "resolution": "256", "num_steps": 1, "num_video_frames_per_chunk": 9}
    (tmp_path / "edge.json").write_text(json.dumps(sample))
    generation = run_spec(tmp_path / "edge.json", backend=standin(tmp_path), profile="nano", guardrails=False,
                          out=tmp_path / "out")
    run_folder = Path(generation.provenance["run_folder"])
    written = json.loads((run_folder / "edge_run.json").read_text())
    assert written == {**sample, "vision_path": str(tmp_path / "rgb.mp4")}  # unchanged but for the absolute path
    assert generation.frames.shape == (9, 192, 320, 3) and generation.fps == 24.0
    out = tmp_path / "out" / "edge_run"
    assert sorted(p.name for p in out.iterdir()) == ["control_edge.mp4", "vision.json", "vision.mp4"]
    manifest = json.loads((out / "vision.json").read_text())
    assert manifest["provenance"]["control_files"] == {"edge": "control_edge.mp4"}  # the manifest names it


def test_a_dry_run_writes_the_run_folder_with_the_runs_guardrails(tmp_path):
    """On the framework the profile picks the model and the guardrails; the framework's defaults fill the rest."""
    sample = {"name": "still", "model_mode": "text2image", "prompt": "a robot"}
    backend = FrameworkBackend(tmp_path, python=sys.executable, work_dir=tmp_path / "runs")
    for kwargs, model, flag in ((dict(profile="nano"), "Cosmos3-Nano", "--guardrails"),
                                (dict(profile="super", guardrails=False), "Cosmos3-Super", "--no-guardrails"),
                                (dict(profile="tiny", model="nvidia/Cosmos3-Edge"), "Cosmos3-Edge", "--no-guardrails")):
        run = plan_spec(sample, backend=backend, out=tmp_path / "out", **kwargs)
        assert flag in run.command and run.command[run.command.index("--checkpoint-path") + 1] == model
        assert json.loads(run.input_file.read_text()) == sample  # the profile's tier, frames, steps are not added
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------- several requests


def _small(mode: str, **values) -> GenerationRequest:
    frames = {} if mode == "text2image" else {"num_frames": 9}
    return GenerationRequest(mode=mode, prompt="A red ball rolls to the left across a grey floor.", profile="nano",
                             tier="256", num_inference_steps=2, guardrails=False, seed=3, **frames, **values)


@pytest.mark.slow
def test_several_requests_run_in_one_framework_process_as_they_would_alone(tmp_path):
    backend = standin(tmp_path)
    requests = [_small("text2video"), _small("text2image")]
    video, image = backend.generate_many(requests, names=["clip", "still"])
    (folder,) = (tmp_path / "runs").iterdir()  # one run: one command, one input file with a sample per line
    lines = (folder / "samples.jsonl").read_text().splitlines()
    assert [json.loads(line)["name"] for line in lines] == ["clip", "still"]
    assert video.provenance["command"] == image.provenance["command"] == (folder / "command.txt").read_text().strip()
    assert video.request is requests[0].resolve() and image.frames.shape[0] == 1 and video.frames.shape[0] == 9
    alone = standin(tmp_path / "alone").generate(requests[0])
    assert (alone.frames == video.frames).all()


@pytest.mark.slow
def test_a_batchs_progress_bar_covers_every_samples_steps(tmp_path, monkeypatch):
    """The samples of one run follow one another in its log, each counting its steps from 1: one bar over all."""
    from cosmos_helpers.backends import framework

    class Bar:
        def __init__(self, total, *_args, **_kwargs):
            self.total, self.n, self.seen = total, 0, []

        def refresh(self):
            self.seen.append((self.n, self.total))

        def close(self):
            bars.append(self)

    bars: list[Bar] = []
    monkeypatch.setattr(framework, "progress_bar", lambda total, *a, **k: Bar(total))
    backend = standin(tmp_path)
    backend.progress = True
    requests = [_small("text2video"), _small("text2image").replace(num_inference_steps=3)]
    backend.generate_many(requests, names=["clip", "still"])
    (bar,) = bars
    assert bar.seen == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]
    counter = framework.StepProgress(Bar(None), [4])  # one sample: the bar follows the log's own counter
    for line in ("Loading shards 1/2", "step 1/4", "step 4/4"):
        counter.update(line)
    assert counter.bar.seen == [(1, 2), (1, 4), (4, 4)]


def test_several_requests_need_one_checkpoint_and_distinct_names(tmp_path):
    backend = standin(tmp_path)
    with pytest.raises(ValidationError, match="one checkpoint") as caught:
        backend.generate_many([_small("text2image"), _small("text2image").replace(guardrails=True)])
    assert caught.value.field == "requests"
    with pytest.raises(ValidationError, match="distinct"):
        backend.generate_many([_small("text2image")] * 2, names=["a", "a"])
    assert not (tmp_path / "runs").exists()  # refused before anything was written


@pytest.mark.slow
def test_generate_and_save_all_loads_what_is_done_and_runs_the_rest_together(tmp_path):
    from cosmos_helpers import generate_and_save, generate_and_save_all
    from cosmos_helpers.errors import OutputExistsError

    backend = standin(tmp_path)
    first, second = _small("text2image"), _small("text2image", negative_prompt="blurry")
    generate_and_save(backend, first, tmp_path / "out" / "first")
    calls = []
    backend.generate_many = lambda requests, names: calls.append(names) or [backend.generate(r) for r in requests]
    results = generate_and_save_all(backend, {tmp_path / "out" / "first": first, tmp_path / "out" / "second": second})
    assert calls == [] and results[tmp_path / "out" / "first"].provenance["skipped"]  # one left: run alone
    assert (tmp_path / "out" / "second.json").is_file()
    with pytest.raises(OutputExistsError):  # another request's output at a stem: refused before any work
        generate_and_save_all(backend, {tmp_path / "out" / "first": second, tmp_path / "out" / "third": first})
    assert not (tmp_path / "out" / "third.json").exists()
