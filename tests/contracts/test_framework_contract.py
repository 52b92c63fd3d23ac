"""Framework input files held to the real framework's contract (``fixtures/cosmos_framework-5eee9ed.json``, read
from cosmos-framework's own code): our field model's schema, the defaults ``resolved()`` reports, the framework's
own example inputs loading, running unchanged on diffusers (tiny) and reaching the framework byte for byte."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pytest

import numpy as np

from cosmos_helpers import media
from cosmos_helpers.samples import render_drive, sample_trajectory
from cosmos_helpers.backends.framework import FrameworkBackend
from cosmos_helpers.cli import main
from cosmos_helpers.protocol import action
from cosmos_helpers.protocol import framework as fw
from cosmos_helpers.samples import rolling_ball_clip
from cosmos_helpers.specs import SampleFields, load_inputs, load_spec
from cosmos_helpers.specs.load import Sample
from cosmos_helpers.trajectories import save_trajectory

from .conftest import load

CONTRACT = load("cosmos_framework")
EXAMPLES = CONTRACT["example_inputs"]
ACTION = sorted(name for name in EXAMPLES if name.startswith("action_"))
GENERATION = sorted(name for name in EXAMPLES if name not in ACTION)
_DROP = ("title", "description", "default")


def _normalize(node, defs):
    """A property's schema with ``$ref`` resolved, ``| None`` removed and labels dropped: the type, enum, bounds."""
    if isinstance(node, dict):
        if "$ref" in node:
            return _normalize(defs[node["$ref"].rsplit("/", 1)[1]], defs)
        options = node.get("anyOf")
        if options is not None:
            kept = [o for o in options if o != {"type": "null"}]
            if len(kept) == 1:
                return _normalize({**{k: v for k, v in node.items() if k != "anyOf"}, **kept[0]}, defs)
        return {k: _normalize(v, defs) for k, v in node.items() if k not in _DROP}
    if isinstance(node, list):
        return [_normalize(item, defs) for item in node]
    return node


def test_our_field_model_has_the_frameworks_schema_field_by_field():
    real = fw.sample_overrides_schema()
    ours = SampleFields.model_json_schema()
    assert ours["additionalProperties"] is False and set(ours["properties"]) == set(real["properties"]) == \
        set(fw.ALL_FIELDS)
    for name in real["properties"]:
        expected = _normalize(real["properties"][name], real["$defs"])
        assert _normalize(ours["properties"][name], ours.get("$defs", {})) == expected, name


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_example_input_is_valid_and_loads_as_written(tmp_path, name):
    example = EXAMPLES[name]
    jsonschema.validate(example, fw.sample_overrides_schema())
    path = tmp_path / name
    path.write_text(json.dumps(example))
    (sample,) = load_inputs(path)
    assert sample.data == example and sample.payload() == example  # URLs stay URLs
    assert sample.name == example.get("name", Path(name).stem)  # the framework names a sample after its file


# ---------------------------------------------------------------------------------------------- defaults


def _minimal(mode: str) -> Sample:
    data = {"prompt": "a robot", "model_mode": mode}
    if mode in ("image2video", "image2image", "audio_image2video", "forward_dynamics", "inverse_dynamics", "wam"):
        data["vision_path"] = "https://example.com/still.png"
    if mode == "video2video":
        data["vision_path"] = "https://example.com/clip.mp4"
    if mode == "audio_image2video":
        data["sound_path"] = "https://example.com/chime.wav"
    if mode == "forward_dynamics":
        data["action_path"] = "https://example.com/actions.json"
    return Sample.from_dict(data, name=mode)


@pytest.mark.parametrize("mode", sorted(m for m in CONTRACT["modality_defaults"] if m != "reasoner"))
def test_resolved_values_are_the_frameworks_per_mode_defaults(mode):
    real = CONTRACT["modality_defaults"][mode]
    r = _minimal(mode).resolved()
    for key in ("num_steps", "guidance", "shift", "fps", "aspect_ratio", "sigma_max", "normalize_cfg",
                "duration_template", "resolution_template", "inverse_duration_template",
                "inverse_resolution_template", "negative_prompt_keep_metadata", "video_save_quality",
                "image_save_quality", "enable_sound"):
        assert getattr(r, key) == real.get(key), key
    assert r.num_frames == real.get("num_frames", 1)
    promoted = real["negative_prompt_keep_metadata"] and real["negative_metadata_mode"] == "none"
    assert r.negative_metadata_mode == ("same" if promoted else real["negative_metadata_mode"])
    if real.get("negative_prompt_file"):  # the framework's own caption file: named, not readable here
        assert r.negative_prompt is None and real["negative_prompt_file"] in r.sources["negative_prompt"]
    else:
        assert r.negative_prompt == real["negative_prompt"]
    nano = CONTRACT["model_configs"][CONTRACT["default_checkpoint"]]
    assert r.resolution == (None if mode == "image2image" else nano["resolution"])


@pytest.mark.parametrize("checkpoint", sorted(CONTRACT["model_configs"]))
def test_model_configs_set_resolution_and_edges_frame_count(checkpoint):
    hub = CONTRACT["checkpoints"][checkpoint]
    video = _minimal("text2video").resolved(model=hub)
    assert video.resolution == CONTRACT["model_configs"][checkpoint]["resolution"]
    expected = CONTRACT["num_frames_defaults"]["nvidia/Cosmos3-Edge-Reasoner"] if checkpoint == "Cosmos3-Edge" \
        else CONTRACT["modality_defaults"]["text2video"]["num_frames"]
    assert video.num_frames == expected
    assert _minimal("text2image").resolved(model=hub).num_frames == 1


@pytest.mark.parametrize("kind", fw.HINT_KINDS)
def test_transfer_defaults_and_the_single_hint_tuned_defaults(kind):
    hint = {"control_path": "https://example.com/control.mp4"}
    sample = Sample.from_dict({"prompt": "p", "vision_path": "https://example.com/rgb.mp4", kind: hint}, name=kind)
    r = sample.resolved()
    expected = {**CONTRACT["transfer_sample_defaults"], **CONTRACT["transfer_tuned_defaults"][kind]}
    for key, value in expected.items():
        assert getattr(r, key) == value, key
    assert r.hints[0].preset == CONTRACT["transfer_hint_defaults"].get(kind, {}).get(fw.PRESET_FIELDS.get(kind))
    assert r.sources["control_guidance"] == f"{kind} tuned default"


def test_the_frameworks_default_checkpoint_and_hint_presets():
    assert fw.CHECKPOINTS[fw.MODEL_CONFIGS[fw.DEFAULT_CHECKPOINT]["hub"]] == CONTRACT["default_checkpoint"]
    assert {kind: {fw.PRESET_FIELDS[kind]: preset} for kind, preset in fw.HINT_PRESET_DEFAULTS.items()} == \
        CONTRACT["transfer_hint_defaults"]
    schema = fw.sample_overrides_schema()
    for key, value in fw.SAMPLE_FALLBACKS.items():  # what a sample gets when nothing sets it: a valid value
        jsonschema.validate({key: value}, schema)
    r = _minimal("text2video").resolved()
    assert r.model == "nvidia/Cosmos3-Nano" and r.sources["guardrails"] == "the framework's default"


def test_interval_conversion_keeps_the_timesteps_of_the_frameworks_strict_test():
    """``lo < t < hi`` (omni_mot_model.py, transfer.py) against ``lo <= t <= hi`` (diffusers, vLLM-Omni)."""
    timesteps = sorted({0.0, 1e-9, 0.5, 99.99999, 100.0, 100.00001, 400.0, 999.0, 999.99999, 1000.0, 1000.5}
                       | {t * 7.3 for t in range(140)})
    for strict in ((100.0, 1000.0), (0.0, 400.0), (99.5, 100.5), (250.25, 999.0)):
        lo, hi = fw.to_inclusive(strict)
        assert [t for t in timesteps if lo <= t <= hi] == [t for t in timesteps if strict[0] < t < strict[1]]
        assert fw.to_strict((lo, hi)) == strict
    for inclusive in ((100.0, 1000.0), (400.0, 400.0), (0.5, 700.0)):
        lo, hi = fw.to_strict(inclusive)
        assert [t for t in timesteps if lo < t < hi] == [t for t in timesteps if inclusive[0] <= t <= inclusive[1]]
        jsonschema.validate({"guidance_interval": [lo, hi]}, fw.sample_overrides_schema())
    assert fw.to_strict((0.0, 1000.0))[0] == 0.0  # the framework's bounds are non-negative (no step runs at t = 0)


def test_two_hints_get_no_tuned_defaults():
    both = {"prompt": "p", "vision_path": "https://example.com/rgb.mp4", "edge": {},
            "depth": {"control_path": "https://example.com/depth.mp4"}}
    r = Sample.from_dict(both, name="two").resolved()
    v2v = CONTRACT["modality_defaults"]["video2video"]
    assert (r.guidance, r.shift, r.control_guidance) == (v2v["guidance"], v2v["shift"], 1.0)
    assert r.num_video_frames_per_chunk == CONTRACT["transfer_sample_defaults"]["num_video_frames_per_chunk"]


# ---------------------------------------------------------------------------------------------- the examples, run


@pytest.fixture()
def examples_dir(tmp_path, monkeypatch):
    """The examples as files, and the framework's download cache pre-filled with our own media for their URLs."""
    cache = tmp_path / "cache"
    monkeypatch.setenv(fw.DOWNLOAD_CACHE_ENV, str(cache))
    for name, example in EXAMPLES.items():
        (tmp_path / name).write_text(json.dumps(example))
        url = example.get("vision_path")
        if not url:
            continue
        clip = rolling_ball_clip(17, 320, 180)
        if name in ACTION:  # small media (an action run never upscales) and our own trajectory for its actions
            steps = example["action_chunk_size"]
            clip = render_drive(sample_trajectory(example["domain_name"], steps), 32, 32)
            if example.get("action_path"):
                target = fw.download_cache_path(example["action_path"], "action.json", cache)
                save_trajectory(target, sample_trajectory(example["domain_name"], steps), overwrite=True)
                Path(f"{target}.done").write_text(example["action_path"])
        suffix = Path(url).suffix.lower()
        target = fw.download_cache_path(url, f"vision{suffix}", cache)
        if suffix == ".mp4":
            media.write_mp4(target, clip, 24, overwrite=True)
        else:
            media.write_bytes_atomic(target, media.image_bytes(clip[0], "PNG" if suffix == ".png" else "JPEG"),
                                     overwrite=True)
        Path(f"{target}.done").write_text(url)
    return tmp_path


@pytest.mark.parametrize("name", GENERATION)
def test_example_runs_unchanged_on_diffusers_tiny(examples_dir, capsys, name):
    example, out = EXAMPLES[name], examples_dir / "out"
    assert main(["run", "--input", str(examples_dir / name), "--out", str(out), "--steps", "1"]) == 0
    printed = Path(capsys.readouterr().out.strip().splitlines()[-1])
    sample_name = example.get("name", Path(name).stem)
    assert printed.parent == out / sample_name
    image = example.get("model_mode") == "text2image"
    assert printed.name == fw.vision_file(1 if image else 9)
    manifest = json.loads(printed.with_suffix(".json").read_text())
    assert manifest["request"]["input"] == example and manifest["request"]["num_steps"] == 1
    if image:
        assert media.read_image(printed).shape == (128, 128, 3)  # tiny profile: the CPU tier at the input's 1:1
        return
    video = media.read_video(printed, with_audio=True)
    assert video.frames.shape == (9, 96, 160, 3)  # tiny: CPU tier, 9 frames, 16:9 (the framework's default)
    probe = media.probe_video(printed)
    if example.get("enable_sound"):
        import av

        with av.open(str(printed)) as container:
            assert container.streams.audio[0].codec_context.name == "aac"
        assert probe["audio_rate"] == 48000 and video.sound.shape[0] == 2
    else:
        assert probe["audio_rate"] is None


@pytest.mark.slow  # 17 or 61 frames each
@pytest.mark.parametrize("name", ACTION)
def test_action_example_runs_unchanged_on_diffusers_tiny(examples_dir, capsys, name):
    example, out = EXAMPLES[name], examples_dir / "out"
    assert load_spec(examples_dir / name).mode in fw.ACTION_MODES
    assert main(["run", "--input", str(examples_dir / name), "--out", str(out), "--steps", "1"]) == 0
    printed = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed == out / example["name"] / fw.vision_file(2)
    manifest = json.loads(printed.with_suffix(".json").read_text())
    assert manifest["request"]["input"] == example and manifest["request"]["num_steps"] == 1
    chunk, width = example["action_chunk_size"], action.RAW_DIM[example["domain_name"]]
    # the 32x32 input is never upscaled: the video keeps its size, one frame per action step plus the start
    assert media.read_video(printed).frames.shape == (chunk + 1, 32, 32, 3)
    predicted = manifest["actions"]
    if example["model_mode"] == "forward_dynamics":  # the trajectory was given, not predicted
        assert predicted is None and manifest["request"]["files"]["action_path"]
    else:
        assert np.asarray(predicted).shape == (chunk, width) and np.isfinite(predicted).all()


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_framework_gets_the_example_unchanged(examples_dir, name):
    sample = load_spec(examples_dir / name)
    backend = FrameworkBackend(examples_dir, python=sys.executable, work_dir=examples_dir / "runs")
    run = backend.prepare(sample.payload(), name=sample.name, model="nvidia/Cosmos3-Nano", guardrails=True,
                          overrides={"seed": 3})
    written = json.loads(run.input_file.read_text())
    assert written == EXAMPLES[name]
    jsonschema.validate(written, fw.sample_overrides_schema())
    assert run.input_file.stem == sample.name  # the framework names an unnamed sample after its file
    flags = [arg for arg in run.command[3:] if arg.startswith("-")]
    assert set(flags) <= set(CONTRACT["cli_flags"]) and "--seed" in flags
    assert run.command[run.command.index("--checkpoint-path") + 1] in CONTRACT["checkpoints"]


def test_local_paths_reach_the_framework_absolute(tmp_path):
    media.write_png(tmp_path / "still.png", rolling_ball_clip(1, 64, 48)[0])
    (tmp_path / "inputs").mkdir()
    data = {"model_mode": "image2video", "prompt": "p", "vision_path": "../still.png", "resolution": "480"}
    (tmp_path / "inputs" / "i2v.json").write_text(json.dumps(data))
    code = main(["run", "--input", str(tmp_path / "inputs" / "i2v.json"), "--backend", "framework", "--checkout",
                 str(tmp_path), "--profile", "nano", "--dry-run"])
    assert code == 0
    (folder,) = (tmp_path / "outputs" / "cosmos_helpers").iterdir()
    written = json.loads((folder / "i2v.json").read_text())
    assert written == {**data, "vision_path": str(tmp_path / "still.png")}
    assert (folder / "command.txt").read_text().split()[-3:] == ["--checkpoint-path", "Cosmos3-Nano", "--guardrails"]
