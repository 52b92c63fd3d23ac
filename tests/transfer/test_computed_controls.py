"""Transfer with depth and seg computed from the sample's own clip (``compute_controls``) on every backend that
takes supplied controls: the computed videos become ordinary control files (diffusers runs them, the framework
stand-in reads them from its input file, the vLLM-Omni form uploads one and names the other), and what cannot
be honoured is refused before any work."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cosmos_helpers import media
from cosmos_helpers.backends.framework import FrameworkBackend
from cosmos_helpers.controls import read_record, write_control_videos
from cosmos_helpers.errors import OutputExistsError, ValidationError
from cosmos_helpers.samples import rolling_ball_clip
from cosmos_helpers.specs import Sample, given_fields
from cosmos_helpers.specs.load import load_inputs
from cosmos_helpers.transfer.runner import parse_compute_controls, with_computed_controls
from cosmos_helpers.transfer.runner import plan_spec, run_spec
from cosmos_helpers.backends.vllm_transfer import transfer_form

REPO = Path(__file__).resolve().parents[2]
TINY = {"depth": "tiny", "seg": "tiny"}


@pytest.fixture()
def clip(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)  # a dict sample's paths are relative to the current folder
    media.write_mp4(tmp_path / "rgb.mp4", rolling_ball_clip(5, 160, 90), 24)
    return tmp_path / "rgb.mp4"


def sample(**fields) -> dict:
    return {"name": "own", "prompt": "a red ball", "vision_path": "rgb.mp4", "seed": 2, "resolution": "256",
            "num_steps": 1, "num_video_frames_per_chunk": 5, **fields}


@pytest.mark.slow
def test_diffusers_transfers_with_depth_and_seg_computed_from_the_clip(tmp_path, clip, tiny_backend):
    spec = tmp_path / "own.json"
    spec.write_text(json.dumps(sample(seg={"weight": 0.5})))
    generation = run_spec(spec, backend=tiny_backend, profile="tiny", out=tmp_path / "out", progress=False,
                          compute_controls=TINY)
    folder = tmp_path / "out" / "own"
    hints = {h.kind: h for h in generation.request.resolved.hints}
    assert hints["depth"].control_path == str(folder / "estimated_depth.mp4") and hints["seg"].weight == 0.5
    assert generation.frames.shape[0] == 5
    for kind in TINY:
        assert read_record(folder / f"estimated_{kind}.mp4")["model"] == "tiny"
        assert generation.request.files[f"{kind}.control_path"] == media.file_sha256(folder / f"estimated_{kind}.mp4")
    again = run_spec(spec, backend=tiny_backend, profile="tiny", out=tmp_path / "out", progress=False,
                     compute_controls=TINY)
    assert again.provenance["skipped"]  # the same clip and models: the finished run is found, nothing recomputed
    other = tmp_path / "other.json"
    other.write_text(json.dumps(sample(prompt="a blue box", seg={"weight": 0.5})))
    from cosmos_helpers.transfer import runner

    def not_now(*args, **kwargs):
        raise AssertionError("the control models ran before the refusal")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner, "write_control_videos", not_now)
        with pytest.raises(OutputExistsError, match="another input"):
            run_spec(other, backend=tiny_backend, profile="tiny", out=tmp_path / "out", progress=False,
                     compute_controls=TINY)


@pytest.mark.slow
def test_the_framework_reads_the_computed_controls_from_its_input_file(tmp_path, clip):
    backend = FrameworkBackend.standin(work_dir=tmp_path / "runs", progress=False)
    generation = run_spec(sample(), backend=backend, profile="nano", guardrails=False, out=tmp_path / "out",
                          compute_controls={"depth": "tiny"}, progress=False)
    written = json.loads((Path(generation.provenance["run_folder"]) / "own.json").read_text())
    assert written["depth"] == {"control_path": str((tmp_path / "out" / "own" / "estimated_depth.mp4").resolve())}
    assert generation.frames.shape[0] == 5


def test_vllm_omni_uploads_one_computed_control_and_names_the_other_on_a_shared_server(tmp_path, clip):
    data = sample()
    computed = with_computed_controls(Sample.from_dict(data, base_dir=tmp_path, computed=tuple(TINY)), TINY,
                                      tmp_path / "out" / "own")
    write_control_videos(clip, TINY, tmp_path / "out" / "own", progress=False)
    r = computed.resolved(profile="tiny")
    fields, files = transfer_form(r, given_fields(computed), server_paths=True)
    extra = json.loads(fields["extra_params"])
    assert fields["control_type"] == "depth" and files["control_reference"][0] == "estimated_depth.mp4"
    assert extra["seg"] == {"control_path": str((tmp_path / "out" / "own" / "estimated_seg.mp4").resolve())}
    with pytest.raises(ValidationError, match="one control per request"):  # a remote server: only one upload
        transfer_form(r, given_fields(computed))


BAD = [
    (sample(vision_path=None), TINY, "depth.control_path"),  # "neither a control_path nor a vision_path"
    (sample(depth={"control_path": "rgb.mp4"}), {"depth": "tiny"}, "depth.control_path"),
    (sample(), {"normals": "tiny"}, "compute_controls"),
    (sample(), {"wsm": "tiny"}, "compute_controls"),
    (sample(), {"depth": str(REPO)}, "compute_controls.depth"),
]


@pytest.mark.parametrize(("data", "models", "field"), BAD, ids=[b[2] + str(i) for i, b in enumerate(BAD)])
def test_bad_requests_are_refused_before_any_work(tmp_path, clip, data, models, field):
    with pytest.raises(ValidationError) as refused:
        run_spec({k: v for k, v in data.items() if v is not None}, backend="diffusers", profile="tiny",
                 out=tmp_path / "out", compute_controls=models)
    assert refused.value.field == field and refused.value.fix
    assert not (tmp_path / "out").exists()


def test_a_framework_dry_run_cannot_name_controls_not_yet_computed(tmp_path, clip):
    backend = FrameworkBackend(tmp_path, python=sys.executable, work_dir=tmp_path / "runs")
    with pytest.raises(ValidationError, match="dry run") as refused:
        plan_spec(sample(), backend=backend, profile="nano", out=tmp_path / "out", compute_controls={"depth": "tiny"})
    assert refused.value.field == "compute_controls"


def test_the_command_line_names_each_model(tmp_path, clip):
    assert parse_compute_controls("depth=tiny, seg=nvidia/segformer-b0-finetuned-ade-512-512") == {
        "depth": "tiny", "seg": "nvidia/segformer-b0-finetuned-ade-512-512"}
    with pytest.raises(ValidationError, match="names no model"):
        parse_compute_controls("depth,seg")
    (tmp_path / "own.json").write_text(json.dumps(sample(depth={})))
    with pytest.raises(ValidationError, match="precomputed control video is required"):
        load_inputs(tmp_path / "own.json")  # as the framework would: depth without a file
    assert load_inputs(tmp_path / "own.json", computed=("depth",))[0].hint_kinds == ("depth",)


def test_what_the_vllm_omni_form_cannot_send_is_refused_before_the_control_models_run(tmp_path, clip):
    from cosmos_helpers import VllmOmniBackend

    backend = VllmOmniBackend(url="http://127.0.0.1:9")  # nothing listens: a refusal must come before any request
    with pytest.raises(ValidationError) as refused:
        run_spec(sample(), backend=backend, out=tmp_path / "out", compute_controls=TINY, progress=False)
    assert refused.value.field == "seg.control_path" and "server_paths=True" in refused.value.fix
    assert not (tmp_path / "out").exists()  # no control video was computed


@pytest.mark.slow
def test_the_vllm_omni_stand_in_runs_a_transfer_with_computed_controls(tmp_path, clip):
    from cosmos_helpers.transfer import SpecRunner

    with SpecRunner("vllm-omni", profile="tiny", output_dir=tmp_path / "out", progress=False,
                    overrides={"resolution": "256"}, compute_controls={"depth": "tiny"}) as runner:
        generation = runner.run(sample(), compute_controls={"seg": "tiny"})
    folder = tmp_path / "out" / "own"
    assert generation.frames.shape[0] == 5
    assert {f"{kind}.control_path" for kind in TINY} <= set(generation.request.files)
    assert generation.request.resolved.hints[0].control_path == str(folder.resolve() / "estimated_depth.mp4")


def test_the_controls_command_writes_control_videos_for_a_run_elsewhere(tmp_path, clip, capsys):
    from cosmos_helpers.cli import main

    assert main(["controls", str(clip), "--compute", "depth=tiny", "--out", str(tmp_path / "ctl")]) == 0
    kind, path = capsys.readouterr().out.strip().split("\t")
    assert kind == "depth" and media.read_video(path).frames.shape == (5, 90, 160, 3)
    assert main(["controls", str(clip), "--compute", "depth"]) != 0
    assert "--compute: 'depth' names no model" in capsys.readouterr().err  # the flag named, with the fix
