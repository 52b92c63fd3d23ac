"""Framework input files: reading (objects, lists, JSONL, names), the input kept as written, effective values and
where they come from, profiles and overrides, validation messages, chunk plans, prompt text, consistency warnings."""

from __future__ import annotations

import itertools
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cosmos_helpers.errors import ValidationError
from cosmos_helpers.protocol import framework as fw
from cosmos_helpers.specs import Sample, load_inputs, load_spec
from cosmos_helpers.specs.transfer import check_control_consistency, control_directive, format_transfer_prompt, \
    plan_chunks

# A cookbook-style edge sample, deliberately with keys out of schema order and an int guidance.
EDGE_SPEC: dict[str, Any] = {
    "name": "edge_warehouse",
    "prompt_path": "prompts/edge.json",
    "negative_prompt_file": "negative_prompt.json",
    "vision_path": "media/input.mp4",
    "edge": {"preset_edge_threshold": "medium", "control_path": "controls/edge.mp4"},
    "resolution": "720",
    "aspect_ratio": "16,9",
    "num_frames": 121,
    "fps": 30,
    "num_steps": 50,
    "guidance": 3,
    "shift": 10.0,
    "seed": 2026,
    "negative_metadata_mode": "none",
    "negative_prompt_keep_metadata": False,
    "control_guidance": 1.5,
    "num_video_frames_per_chunk": 121,
    "num_conditional_frames": 1,
    "num_first_chunk_conditional_frames": 0,
    "share_vision_temporal_positions": True,
    "guidance_interval": None,
}
COOKBOOK_SPECS = Path(__file__).resolve().parents[2] / "cookbooks" / "cosmos3" / "generator" / "transfer" / "specs"
MEDIA = ("media/input.mp4", "media/still.png", "media/voice.wav", "controls/edge.mp4", "controls/depth.mp4",
         "controls/seg.mp4", "controls/wsm.mp4")


@pytest.fixture()
def spec_dir(tmp_path: Path) -> Path:
    """A folder with (empty) media files and prompt files; reading an input only checks that files exist."""
    for name in MEDIA:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "prompts").mkdir(exist_ok=True)
    (tmp_path / "prompts/edge.json").write_text(json.dumps({"subject": "a robot", "camera": {"move": "pan"}}, indent=4))
    (tmp_path / "prompts/plain.txt").write_text("  A robot walks through a warehouse.\n")
    (tmp_path / "negative_prompt.json").write_text(json.dumps({"quality": "blurry"}, indent=2))
    return tmp_path


def write_json(folder: Path, data: Any, name: str = "spec.json") -> Path:
    path = folder / name
    path.write_text(json.dumps(data, indent=2))
    return path


def hint_spec(folder: Path, *kinds: str, **fields: Any) -> Sample:
    data: dict[str, Any] = {"prompt": "A robot."}
    for kind in kinds:
        data[kind] = {} if kind in ("edge", "blur") else {"control_path": f"controls/{kind}.mp4"}
    if any(k in ("edge", "blur") for k in kinds):
        data["vision_path"] = "media/input.mp4"
    data.update(fields)
    return Sample.from_dict({k: v for k, v in data.items() if v is not None}, base_dir=folder, name="t")


# ---------------------------------------------------------------------- reading


def test_the_input_is_kept_as_written(spec_dir: Path) -> None:
    sample = load_spec(write_json(spec_dir, EDGE_SPEC))
    assert json.dumps(dict(sample.data)) == json.dumps(EDGE_SPEC)
    assert isinstance(sample.data["guidance"], int)
    assert sample.to_json() == json.dumps(EDGE_SPEC, indent=2, ensure_ascii=False) + "\n"


def test_the_payload_makes_paths_absolute_and_keeps_everything_else(spec_dir: Path) -> None:
    payload = load_spec(write_json(spec_dir, EDGE_SPEC)).payload()
    assert payload == {**EDGE_SPEC, "prompt_path": str(spec_dir / "prompts/edge.json"),
                       "negative_prompt_file": str(spec_dir / "negative_prompt.json"),
                       "vision_path": str(spec_dir / "media/input.mp4"),
                       "edge": {"preset_edge_threshold": "medium", "control_path": str(spec_dir / "controls/edge.mp4")}}
    assert list(payload) == list(EDGE_SPEC)
    bare = load_spec(write_json(spec_dir, {**EDGE_SPEC, "negative_prompt_file": "neg_prompts.json"})).payload()
    assert bare["negative_prompt_file"] == "neg_prompts.json"  # the framework's own defaults/ file


def test_lists_and_jsonl_hold_several_samples_named_like_the_framework(spec_dir: Path) -> None:
    lines = [{"prompt": "a"}, {"prompt": "b", "name": "named"}, {"prompt": "c"}]
    (spec_dir / "batch.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    assert [s.name for s in load_inputs(spec_dir / "batch.jsonl")] == ["batch_0", "named", "batch_2"]
    assert [s.name for s in load_inputs(write_json(spec_dir, lines, "many.json"))] == ["many_0", "named", "many_2"]
    assert load_spec(write_json(spec_dir, {"prompt": "x"}, "single.json")).name == "single"
    with pytest.raises(ValidationError, match="two samples are named 'same'"):
        load_inputs(write_json(spec_dir, [{"prompt": "a", "name": "same"}, {"prompt": "b", "name": "same"}], "d.json"))
    with pytest.raises(ValidationError, match="holds 3 samples"):
        load_spec(spec_dir / "batch.jsonl")
    with pytest.raises(ValidationError, match="line 2"):
        (spec_dir / "bad.jsonl").write_text('{"prompt": "a"}\n{oops\n')
        load_inputs(spec_dir / "bad.jsonl")


def test_every_framework_field_is_accepted(spec_dir: Path) -> None:
    data = {"prompt": "p", "model_mode": "image2video", "vision_path": "media/still.png", "enable_sound": True,
            "condition_frame_indexes_vision": [0], "condition_video_keep": "last", "image_save_quality": 80,
            "num_outputs": 2, "prompt_upsampling": True, "prompt_upsampler_temperature": 0.5,
            "defaults_file": "prompts/plain.txt", "extra": {"anything": [1, 2]}, "domain_name": "av",
            "max_new_tokens": 12, "model": "nvidia/Cosmos3-Nano", "sigma_max": 70.0}
    sample = Sample.from_dict(data, base_dir=spec_dir, check_files=True)
    assert sample.data == data and sample.mode == "image2video"


def test_relative_paths_resolve_against_the_input_files_folder(spec_dir: Path) -> None:
    r = load_spec(write_json(spec_dir, EDGE_SPEC)).resolved()
    assert r.vision_path == str(spec_dir / "media/input.mp4")
    assert r.hints[0].control_path == str(spec_dir / "controls/edge.mp4")
    url = Sample.from_dict({"prompt": "p", "vision_path": "https://example.com/a.mp4"}, base_dir=spec_dir)
    assert url.resolved().vision_path == "https://example.com/a.mp4" and url.mode == "video2video"


@pytest.mark.parametrize("path", sorted(COOKBOOK_SPECS.glob("*.json")), ids=lambda p: p.name)
def test_the_cookbook_specs_are_framework_inputs_the_profile_can_size(path: Path) -> None:
    from cosmos_helpers.transfer.assets import NEGATIVE_PROMPT

    data = json.loads(path.read_text())
    jsonschema.validate(data, fw.sample_overrides_schema())
    computed = tuple(k for k in fw.ESTIMATED_HINTS if k in data and "control_path" not in data[k])  # compute_controls
    r = load_spec(path, computed=computed).resolved(profile="tiny")  # every file it names exists
    assert not {"resolution", "num_steps"} & set(data)  # explicit values win, so these would pin the CPU run
    assert (r.resolution, r.num_steps) == ("128", 4) and not r.notes
    assert data["negative_prompt"] == json.dumps(NEGATIVE_PROMPT, separators=(",", ":"))


# ---------------------------------------------------------------------- effective values

TUNED = {
    "edge": (3.0, 1.5, 189, 24, 93),
    "blur": (3.0, 1.5, 189, 24, 93),
    "depth": (3.0, 1.5, 189, 24, 93),
    "seg": (3.0, 2.0, 189, 24, 93),
    "wsm": (1.0, 3.0, 101, 10, 101),
}


@pytest.mark.parametrize("kind", fw.HINT_KINDS)
def test_single_hint_tuned_defaults(spec_dir: Path, kind: str) -> None:
    r = hint_spec(spec_dir, kind).resolved()
    guidance, control_guidance, num_frames, fps, chunk = TUNED[kind]
    assert (r.guidance, r.control_guidance, r.shift) == (guidance, control_guidance, 10.0)
    assert (r.num_frames, r.fps, r.num_video_frames_per_chunk, r.chunk_frames) == (num_frames, fps, chunk, chunk)
    assert r.sources["control_guidance"] == f"{kind} tuned default"
    assert (r.num_conditional_frames, r.max_frames, r.num_first_chunk_conditional_frames) == (1, 5000, 0)
    assert r.share_vision_temporal_positions is True and r.emphasize_control_in_prompt is True
    assert (r.resolution, r.aspect_ratio, r.num_steps, r.video_save_quality) == ("720", "16,9", 35, 10)
    if kind in ("edge", "blur"):
        assert r.hints[0].preset == "medium"


def test_two_hints_are_ordered_and_weighted(spec_dir: Path) -> None:
    r = hint_spec(spec_dir, "wsm", "seg").resolved()
    assert (r.guidance, r.control_guidance, r.num_video_frames_per_chunk) == (6.0, 1.0, 93)
    assert r.hint_kinds == ("seg", "wsm") and r.normalized_weights == (0.5, 0.5)


def test_input_values_win_over_tuned_defaults(spec_dir: Path) -> None:
    r = hint_spec(spec_dir, "wsm", guidance=2, fps=30).resolved()
    assert (r.guidance, r.fps, r.control_guidance, r.num_frames) == (2.0, 30, 3.0, 101)
    assert r.sources["guidance"] == "input" and r.sources["num_frames"] == "wsm tuned default"


def test_the_profile_fills_only_what_the_input_leaves_out(spec_dir: Path) -> None:
    bare = Sample.from_dict({"prompt": "p", "model_mode": "text2video"}, base_dir=spec_dir).resolved(profile="tiny")
    assert (bare.resolution, bare.num_frames, bare.num_steps) == ("128", 9, 4)
    assert bare.sources["num_steps"] == "profile tiny" and (bare.guidance, bare.shift) == (6.0, 10.0)
    pinned = Sample.from_dict({"prompt": "p", "model_mode": "text2video", "resolution": "256", "num_frames": 17,
                               "num_steps": 30}, base_dir=spec_dir).resolved(profile="tiny")
    assert (pinned.resolution, pinned.num_frames, pinned.num_steps) == ("256", 17, 30)  # never capped or replaced


def test_a_defaults_file_replaces_the_modes_defaults_and_wins_over_the_profile(spec_dir: Path) -> None:
    defaults = {**fw.MODE_DEFAULTS["text2video"], **fw.PROMPT_DEFAULTS, "num_steps": 7, "guidance": 2.5,
                "resolution_template": fw.RESOLUTION_TEMPLATES["video"], "resolution": "480"}
    defaults.pop("num_frames")
    write_json(spec_dir, defaults, "defaults.json")
    sample = Sample.from_dict({"prompt": "p", "defaults_file": "defaults.json"}, base_dir=spec_dir)
    framed = Sample.from_dict({"prompt": "p", "defaults_file": "defaults.json", "num_frames": 17}, base_dir=spec_dir)
    for r in (sample.resolved(profile="tiny"), framed.resolved()):
        assert (r.num_steps, r.guidance, r.resolution) == (7, 2.5, "480")
        assert r.sources["num_steps"] == "defaults_file defaults.json"
    assert sample.resolved(profile="tiny").num_frames == 9  # what the defaults file leaves to the profile
    with pytest.raises(ValidationError, match="num_frames") as missing:
        sample.resolved()  # ... and without a profile to nobody: the framework fails on it
    assert missing.value.field == "defaults_file"


def test_command_line_overrides_win_over_the_input(spec_dir: Path) -> None:
    r = load_spec(write_json(spec_dir, EDGE_SPEC)).resolved(profile="tiny", overrides={"resolution": "256",
                                                                                        "num_steps": 2, "seed": 5})
    assert (r.resolution, r.num_steps, r.seed) == ("256", 2, 5) and r.bucket_size == (320, 192)
    assert r.sources["resolution"] == "command line"
    with pytest.raises(ValidationError, match="guidance"):
        load_spec(write_json(spec_dir, EDGE_SPEC)).resolved(overrides={"guidance": 1.0})
    for bad, field in (({"resolution": "999"}, "resolution"), ({"num_steps": 0}, "num_steps")):
        with pytest.raises(ValidationError) as refused:
            load_spec(write_json(spec_dir, EDGE_SPEC)).resolved(overrides=bad)
        assert refused.value.field == field
    assert load_spec(write_json(spec_dir, EDGE_SPEC)).resolved(overrides={"resolution": "480p"}).resolution == "480"


def test_frames_round_up_and_the_seed_comes_from_the_name_and_output(spec_dir: Path) -> None:
    sample = Sample.from_dict({"prompt": "p", "num_frames": 120}, base_dir=spec_dir, name="clip")
    r = sample.resolved(output_dir=spec_dir / "out" / "clip")
    assert r.num_frames == 121 and any("121" in note for note in r.notes)
    assert r.seed == fw.fallback_seed("clip", (spec_dir / "out" / "clip").absolute())
    assert sample.resolved().seed is None and "run time" in sample.resolved().sources["seed"]


def test_negative_metadata_promotion(spec_dir: Path) -> None:
    assert hint_spec(spec_dir, "edge").resolved().negative_metadata_mode == "same"
    assert hint_spec(spec_dir, "edge", negative_prompt_keep_metadata=False).resolved().negative_metadata_mode == "none"
    assert hint_spec(spec_dir, "edge", negative_metadata_mode="inverse").resolved().negative_metadata_mode == "inverse"


def test_prompt_files_are_read_as_the_framework_reads_them(spec_dir: Path) -> None:
    r = load_spec(write_json(spec_dir, EDGE_SPEC)).resolved()
    assert r.prompt == '{"subject": "a robot", "camera": {"move": "pan"}}'  # transfer: json.dumps(json.loads(file))
    plain = hint_spec(spec_dir, "edge", prompt=None, prompt_path="prompts/plain.txt").resolved()
    assert plain.prompt == "A robot walks through a warehouse."


def test_the_default_negative_is_the_frameworks_and_negative_prompt_file_is_not_read(spec_dir: Path) -> None:
    r = load_spec(write_json(spec_dir, EDGE_SPEC)).resolved()
    assert r.negative_prompt is None and fw.NEGATIVE_PROMPT_FILE in r.sources["negative_prompt"]
    assert any("negative_prompt_file" in note and "args.py:885" in note for note in r.notes)
    given = load_spec(write_json(spec_dir, {**EDGE_SPEC, "negative_prompt": "blurry"})).resolved()
    assert given.negative_prompt == "blurry" and given.sources["negative_prompt"] == "input"
    image = Sample.from_dict({"prompt": "p", "model_mode": "text2image"}, base_dir=spec_dir).resolved()
    assert image.negative_prompt == ""


def test_audio_image2video_sample(spec_dir: Path) -> None:
    data = {"model_mode": "audio_image2video", "prompt": "p", "vision_path": "media/still.png",
            "sound_path": "media/voice.wav"}
    sample = load_spec(write_json(spec_dir, data))
    r = sample.resolved(profile="tiny")
    assert r.sound_path == str(spec_dir / "media/voice.wav") and not r.is_transfer and r.enable_sound
    assert (r.num_frames, r.fps, r.guidance, r.resolution, r.num_video_frames_per_chunk) == (9, 24, 6.0, "128", None)
    assert sample.data == data


# ---------------------------------------------------------------------- validation


def _set(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda data: data.update(fields)


INVALID: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("unknown hint", _set(canny={}), "canny"),
    ("unknown hint key", _set(edge={"threshold": "low"}), "edge.threshold"),
    ("preset key for depth", _set(depth={"control_path": "controls/depth.mp4", "preset": "x"}), "depth.preset"),
    ("unknown top-level field", _set(guidence=3.0), "guidence"),
    ("unknown edge preset", _set(edge={"preset_edge_threshold": "none"}), "edge.preset_edge_threshold"),
    ("unknown blur preset", _set(blur={"preset_blur_strength": "strong"}), "blur.preset_blur_strength"),
    ("hint not an object", _set(edge="yes"), "edge"),
    ("missing control file", _set(depth={"control_path": "controls/nope.mp4"}), "depth.control_path"),
    ("missing edge control file", _set(edge={"control_path": "nope.mp4"}), "edge.control_path"),
    ("depth without control_path", _set(depth={"weight": 1.0}), "depth.control_path"),
    ("seg without control_path", _set(seg={}), "seg.control_path"),
    ("wsm without control_path", _set(wsm={}), "wsm.control_path"),
    ("edge without any source", lambda d: (d.pop("vision_path"), d["edge"].pop("control_path")), "edge.control_path"),
    ("transfer field without hint", lambda d: d.pop("edge"), "negative_prompt_file"),
    ("guidance too high", _set(guidance=7.5), "guidance"),
    ("guidance negative", _set(guidance=-0.1), "guidance"),
    ("control_guidance too high", _set(control_guidance=10.5), "control_guidance"),
    ("resolution 1080", _set(resolution="1080"), "resolution"),
    ("resolution with p", _set(resolution="720p"), "resolution"),
    ("resolution as int", _set(resolution=720), "resolution"),
    ("aspect with colon", _set(aspect_ratio="16:9"), "aspect_ratio"),
    ("unknown aspect", _set(aspect_ratio="21,9"), "aspect_ratio"),
    ("overlap >= chunk", _set(num_video_frames_per_chunk=9, num_conditional_frames=9), "num_conditional_frames"),
    ("negative weight", _set(edge={"control_path": "controls/edge.mp4", "weight": -1}), "edge.weight"),
    ("all-zero weights", _set(edge={"control_path": "controls/edge.mp4", "weight": 0},
                              depth={"control_path": "controls/depth.mp4", "weight": 0.0}), "weight"),
    ("guidance interval lo > hi", _set(guidance_interval=[800, 200]), "guidance_interval"),
    ("control interval lo > hi", _set(control_guidance_interval=[900, 100]), "control_guidance_interval"),
    ("interval not a pair", _set(control_guidance_interval=[100]), "control_guidance_interval"),
    ("first-chunk frames without vision", lambda d: (d.pop("vision_path"), d.update(
        num_first_chunk_conditional_frames=1)), "num_first_chunk_conditional_frames"),
    ("fps not an int", _set(fps=29.97), "fps"),
    ("bool as string", _set(show_input="yes"), "show_input"),
    ("prompt and prompt_path", _set(prompt="p"), "prompt_path"),
    ("missing vision file", _set(vision_path="media/none.mp4"), "vision_path"),
    ("vision file of another kind", _set(vision_path="media/voice.wav"), "vision_path"),
    ("sound with transfer", _set(sound_path="media/input.mp4"), "sound_path"),
    ("hint with image mode", _set(model_mode="text2image"), "model_mode"),
    ("unknown model mode", _set(model_mode="transfer"), "model_mode"),
    ("unknown negative mode", _set(negative_metadata_mode="opposite"), "negative_metadata_mode"),
    ("video quality", _set(video_save_quality=11), "video_save_quality"),
    ("audio without sound", lambda d: (d.pop("edge"), [d.pop(k) for k in fw.TRANSFER_ONLY_FIELDS if k in d],
                                       d.pop("control_guidance"), d.update(model_mode="audio_image2video")),
     "sound_path"),
]


@pytest.mark.parametrize(("case", "mutate", "field"), INVALID, ids=[c[0] for c in INVALID])
def test_validation_names_the_field(spec_dir: Path, case: str, mutate: Callable, field: str) -> None:
    data = json.loads(json.dumps(EDGE_SPEC))
    mutate(data)
    with pytest.raises(ValidationError) as excinfo:
        load_spec(write_json(spec_dir, data))
    assert excinfo.value.field == field, str(excinfo.value)
    assert str(excinfo.value).startswith(f"{field}:")
    assert excinfo.value.fix


def test_no_hint_rules(spec_dir: Path) -> None:
    plain = {"prompt": "p", "vision_path": "media/input.mp4", "control_guidance": 1.0}
    load_spec(write_json(spec_dir, plain))
    for key, value in [("control_guidance", 2.0), ("num_conditional_frames", 1), ("emphasize_control_in_prompt", True)]:
        with pytest.raises(ValidationError) as excinfo:
            load_spec(write_json(spec_dir, {**plain, key: value}))
        assert excinfo.value.field == key


def test_validation_messages_say_what_to_write(spec_dir: Path) -> None:
    cases = [
        ({"aspect_ratio": "16:9"}, '"16,9"'),
        ({"resolution": "720p"}, '"720"'),
        ({"guidence": 3}, "'guidance'"),
        ({"edge": {"preset": "low"}}, "preset_edge_threshold"),
        ({"edge": {"control_weight": 2}}, "'weight'"),
    ]
    for change, hint in cases:
        with pytest.raises(ValidationError, match=hint):
            load_spec(write_json(spec_dir, {**EDGE_SPEC, **change}))


# ---------------------------------------------------------------------- chunking


@pytest.mark.parametrize(
    ("total", "chunk", "n_cond", "expected"),
    [
        (121, 121, 1, [(0, 121)]),
        (100, 101, 1, [(0, 100)]),
        (121, 93, 1, [(0, 93), (92, 121)]),
        (189, 93, 1, [(0, 93), (92, 185), (184, 189)]),
        (1, 93, 1, [(0, 1)]),
        (200, 90, 5, [(0, 93), (88, 181), (176, 200)]),
        (93, 93, 0, [(0, 93)]),
        (94, 93, 0, [(0, 93), (93, 94)]),
    ],
)
def test_plan_chunks(total: int, chunk: int, n_cond: int, expected: list[tuple[int, int]]) -> None:
    plan = plan_chunks(total, chunk, n_cond)
    assert plan == expected
    length = 1 if total == 1 else fw.round_up_frames(chunk)
    assert len(plan) == 1 or all(b[0] - a[0] == length - n_cond for a, b in itertools.pairwise(plan))


def test_plan_chunks_rejects_overlap_as_long_as_chunk() -> None:
    with pytest.raises(ValidationError, match="num_conditional_frames"):
        plan_chunks(200, 93, 93)


def test_round_up_frames() -> None:
    assert [fw.round_up_frames(c) for c in (1, 2, 5, 90, 93, 100, 101)] == [1, 5, 5, 93, 93, 101, 101]


# ---------------------------------------------------------------------- prompt formatting

EDGE_DIRECTIVE = (
    "Follow the edge control video precisely: shape, contour, silhouette, position, and motion of every visible "
    "structure must align with the edge signal at every frame."
)


def test_directive_text_is_the_frameworks() -> None:
    assert control_directive(["edge"]) == EDGE_DIRECTIVE
    assert control_directive(["wsm", "depth", "edge"]) == fw.CONTROL_DIRECTIVE.format(hints="edge, depth, wsm")


def test_json_prompt_gets_metadata(spec_dir: Path) -> None:
    r = hint_spec(spec_dir, "edge", negative_prompt_keep_metadata=False).resolved()
    prompt, negative = format_transfer_prompt('{"subject":"robot","duration":"9s"}', '{"q":"blurry"}', r, 1280, 720,
                                              121, 30.0)
    expected = {"subject": "robot", "duration": "4s", "fps": 30.0, "resolution": {"H": 720, "W": 1280},
                "aspect_ratio": "16,9"}
    assert prompt == json.dumps(expected) + " " + EDGE_DIRECTIVE
    assert negative == '{"q":"blurry"}'


def test_json_prompt_of_one_frame_drops_duration(spec_dir: Path) -> None:
    r = hint_spec(spec_dir, "edge", aspect_ratio="4,3", emphasize_control_in_prompt=False).resolved()
    prompt, _ = format_transfer_prompt('{"duration":"9s","fps":24,"a":1}', None, r, 1104, 832, 1, 23.6)
    assert prompt == '{"a": 1, "resolution": {"H": 832, "W": 1104}, "aspect_ratio": "4,3"}'


def test_plain_prompt_and_negative_modes(spec_dir: Path) -> None:
    meta = "The video is 3.9 seconds long and is of 24 FPS. This video is of 720x1280 resolution."
    inverse = "The video is not 3.9 seconds long and is not of 24 FPS. This video is not of 720x1280 resolution."
    cases = {"none": "Blurry, low quality.", "same": f"Blurry, low quality. {meta}",
             "inverse": f"Blurry, low quality. {inverse}"}
    for mode, expected_negative in cases.items():
        r = hint_spec(spec_dir, "depth", "edge", negative_metadata_mode=mode,
                      negative_prompt_keep_metadata=False).resolved()
        prompt, negative = format_transfer_prompt("A robot walks.", "Blurry, low quality.", r, 1280, 720, 93, 24.0)
        assert prompt == f"A robot walks. {meta} " + fw.CONTROL_DIRECTIVE.format(hints="edge, depth")
        assert negative == expected_negative


def test_negative_without_text(spec_dir: Path) -> None:
    same = hint_spec(spec_dir, "edge").resolved()
    assert format_transfer_prompt("x", None, same, 320, 192, 9, 24)[1] == (
        "The video is 0.4 seconds long and is of 24 FPS. This video is of 192x320 resolution.")
    off = hint_spec(spec_dir, "edge", negative_prompt_keep_metadata=False).resolved()
    assert format_transfer_prompt("x", None, off, 320, 192, 9, 24)[1] is None
    assert format_transfer_prompt("x", "", off, 320, 192, 9, 24)[1] is None
    inverse_image = hint_spec(spec_dir, "edge", negative_metadata_mode="inverse").resolved()
    assert format_transfer_prompt("x", "bad", inverse_image, 320, 192, 1, 24)[1] == (
        "bad. The video is not 0.0 seconds long and is not of 24 FPS. This video is not of 192x320 resolution.")


def test_custom_templates_and_no_directive(spec_dir: Path) -> None:
    r = hint_spec(spec_dir, "blur", duration_template="{duration:.2f}s at {fps}",
                  resolution_template="{width} by {height}", emphasize_control_in_prompt=False).resolved()
    prompt, _ = format_transfer_prompt("Hello.", None, r, 160, 96, 9, 24.4)
    assert prompt == "Hello. 0.38s at 24. 160 by 96"


# ---------------------------------------------------------------------- consistency warnings


def test_wsm_control_shorter_than_the_sample_warns(spec_dir: Path) -> None:
    r = hint_spec(spec_dir, "wsm").resolved()
    with pytest.warns(UserWarning) as record:
        messages = check_control_consistency(r, 100, 10.0)
    assert [str(w.message) for w in record] == messages
    assert messages[0].startswith("wsm control has 100 frames, the sample asks 101: the output will have 100 frames, "
                                  "as the framework does")
    assert "mirror-padded to 101 frames" in messages[1] and len(messages) == 2


def test_fps_mismatch_without_vision_path(spec_dir: Path) -> None:
    r = hint_spec(spec_dir, "depth", num_frames=121, fps=30).resolved()
    with pytest.warns(UserWarning, match="written at 30 fps"):
        messages = check_control_consistency(r, 121, 24.0)
    assert messages == ["depth control is 24 fps, the sample's fps is 30: the output is written at 30 fps (without "
                        "vision_path the framework uses the sample's fps), so it plays 1.25x faster than the control."]


def test_fps_comes_from_vision_path(spec_dir: Path) -> None:
    r = hint_spec(spec_dir, "edge", num_frames=121).resolved()
    with pytest.warns(UserWarning, match="written at 30 fps \\(from vision_path\\)"):
        check_control_consistency(r, 121, 24.0, input_fps=30.0)


def test_aspect_and_max_frames_warnings(spec_dir: Path) -> None:
    import numpy as np

    r = hint_spec(spec_dir, "seg", num_frames=8, max_frames=8, fps=24, num_video_frames_per_chunk=5).resolved()
    messages = check_control_consistency(r, np.zeros((12, 48, 64, 3), np.uint8), 24.0, emit=False)
    assert messages[0].startswith("seg control has 12 frames, more than max_frames 8")
    assert any('set "aspect_ratio": "4,3"' in m for m in messages) and len(messages) == 3


def test_consistent_control_is_silent(spec_dir: Path) -> None:
    r = load_spec(write_json(spec_dir, EDGE_SPEC)).resolved()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_control_consistency(r, 121, 30.0, input_fps=30.0) == []
