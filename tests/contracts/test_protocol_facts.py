"""Every table in ``cosmos_helpers.protocol`` equals the same fact read from the real package's code.

The fixtures were written by ``scripts/refresh_contracts.py`` from vllm-omni 0.30.0, cosmos-framework 5eee9ed and
diffusers 0.42.1; a new upstream version regenerates them and these tests say which of our facts moved.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cosmos_helpers.protocol import diffusers as dif
from cosmos_helpers.protocol import framework as fw
from cosmos_helpers.protocol import vllm_omni as vo
from cosmos_helpers.protocol.table import defaults_table

REPO = Path(__file__).resolve().parents[2]


def _sizes(table) -> dict:
    return {tier: {aspect: list(size) for aspect, size in sizes.items()} for tier, sizes in table.items()}


def _enum(schema: dict, field: str) -> list:
    prop = schema["properties"][field]
    for option in prop.get("anyOf", [prop]):
        if "enum" in option:
            return option["enum"]
        if "$ref" in option:
            return schema["$defs"][option["$ref"].rsplit("/", 1)[1]]["enum"]
    raise AssertionError(f"{field} has no enum")


# ---------------------------------------------------------------------------------------------- framework


def test_framework_sizes_tiers_aspects_and_modes(framework_contract):
    schema = fw.sample_overrides_schema()
    real = framework_contract["video_res_size_info"]  # some tiers list more aspects than a sample may ask for
    assert _sizes(fw.SIZES) == {t: {a: real[t][a] for a in fw.ASPECT_RATIOS} for t in fw.TIERS}
    assert list(fw.TIERS) == _enum(schema, "resolution")
    assert list(fw.ASPECT_RATIOS) == _enum(schema, "aspect_ratio")
    assert list(fw.MODEL_MODES) == _enum(schema, "model_mode")


def test_framework_sample_fields_are_exactly_the_real_ones(framework_contract):
    schema = fw.sample_overrides_schema()
    assert schema["additionalProperties"] is False  # an unknown key fails the framework's validation
    assert fw.ALL_FIELDS == set(schema["properties"])
    grouped = [name for group in fw.SAMPLE_FIELDS.values() for name in group]
    assert len(grouped) == len(set(grouped))  # each field in one group


@pytest.mark.parametrize("mode", sorted(fw.MODE_DEFAULTS))
def test_framework_per_mode_defaults(framework_contract, mode):
    real = framework_contract["modality_defaults"][mode]
    ours = fw.MODE_DEFAULTS[mode]
    assert {key: real.get(key) for key in ours} == dict(ours)
    for key, value in fw.PROMPT_DEFAULTS.items():
        assert real[key] == value, key
    image = mode in ("text2image", "image2image")
    assert real["resolution_template"] == fw.RESOLUTION_TEMPLATES["image" if image else "video"]
    if real.get("negative_prompt_file"):
        assert real["negative_prompt_file"] in framework_contract["default_files"]


def test_framework_model_configs_and_checkpoints(framework_contract):
    for name, config in fw.MODEL_CONFIGS.items():
        real = framework_contract["model_configs"][name]
        assert (config["resolution"], config["use_system_prompt"]) == (real["resolution"], real["use_system_prompt"])
        assert framework_contract["checkpoints"][name] == config["hub"]
    assert framework_contract["num_frames_defaults"] == {"nvidia/Cosmos3-Edge-Reasoner": fw.MODEL_CONFIGS[
        "Cosmos3-Edge"]["num_frames"]}
    assert dict(fw.CHECKPOINTS) == {hub: name for name, hub in framework_contract["checkpoints"].items()}


def test_framework_transfer_defaults_and_hints(framework_contract):
    schema = fw.sample_overrides_schema()
    assert dict(fw.TRANSFER_SAMPLE_DEFAULTS) == framework_contract["transfer_sample_defaults"]
    assert {k: dict(v) for k, v in fw.HINT_TUNED_DEFAULTS.items()} == framework_contract["transfer_tuned_defaults"]
    assert {k: {f: "medium"} for k, f in fw.PRESET_FIELDS.items()} == framework_contract["transfer_hint_defaults"]
    assert list(fw.EDGE_PRESETS) == schema["$defs"]["PresetEdgeThreshold"]["enum"]
    assert list(fw.BLUR_PRESETS) == schema["$defs"]["PresetBlurStrength"]["enum"]
    assert set(fw.HINT_FIELDS) == set(schema["$defs"]["TransferOverrides"]["properties"])
    for kind in fw.HINT_KINDS:
        assert kind in schema["properties"]


def test_framework_command_line(framework_contract):
    flags = set(framework_contract["cli_flags"])
    assert set(fw.CLI_FLAGS.values()) <= flags
    assert sorted(fw.PARALLELISM_PRESETS) == sorted(framework_contract["cli_choices"]["--parallelism-preset"])


# ---------------------------------------------------------------------------------------------- vLLM-Omni


def test_vllm_sizes_and_tiers(vllm_contract):
    real = vllm_contract["cosmos3"]["video_res_size_info"]
    assert list(vo.TIERS) == list(real) and _sizes(vo.SIZES) == real


def test_vllm_defaults_per_mode(vllm_contract):
    c = vllm_contract["cosmos3"]["pipeline_constants"]
    image, video, edge = vo.IMAGE_DEFAULTS, vo.VIDEO_DEFAULTS, vo.EDGE_DEFAULTS
    assert (image["width"], image["height"]) == (c["COSMOS3_T2I_DEFAULT_WIDTH"], c["COSMOS3_T2I_DEFAULT_HEIGHT"])
    assert image["num_inference_steps"] == c["COSMOS3_T2I_DEFAULT_NUM_INFERENCE_STEPS"]
    assert image["guidance_scale"] == c["COSMOS3_T2I_DEFAULT_GUIDANCE_SCALE"]
    assert image["flow_shift"] == c["COSMOS3_T2I_DEFAULT_FLOW_SHIFT"]
    assert list(image["guidance_interval"]) == c["COSMOS3_T2I_DEFAULT_GUIDANCE_INTERVAL"]
    assert (video["width"], video["height"]) == (c["COSMOS3_T2V_DEFAULT_WIDTH"], c["COSMOS3_T2V_DEFAULT_HEIGHT"])
    assert video["num_inference_steps"] == c["COSMOS3_T2V_DEFAULT_NUM_INFERENCE_STEPS"]
    assert video["guidance_scale"] == c["COSMOS3_T2V_DEFAULT_GUIDANCE_SCALE"]
    assert video["flow_shift"] == c["COSMOS3_VIDEO_DEFAULT_FLOW_SHIFT"]
    assert edge["image_size"] == (c["COSMOS3_EDGE_T2I_DEFAULT_WIDTH"], c["COSMOS3_EDGE_T2I_DEFAULT_HEIGHT"])
    assert edge["video_size"] == (c["COSMOS3_EDGE_T2V_DEFAULT_WIDTH"], c["COSMOS3_EDGE_T2V_DEFAULT_HEIGHT"])
    assert edge["guidance_scale"] == c["COSMOS3_EDGE_T2V_DEFAULT_GUIDANCE_SCALE"]
    assert edge["flow_shift"] == c["COSMOS3_EDGE_VIDEO_DEFAULT_FLOW_SHIFT"]
    assert vo.MAX_SEQUENCE_LENGTH == c["COSMOS3_DEFAULT_MAX_SEQUENCE_LENGTH"]


def test_vllm_generation_extra_params_are_read_with_these_defaults(vllm_contract):
    reads = vllm_contract["cosmos3"]["pipeline_reads"]
    known = set(reads) | set(vllm_contract["cosmos3"]["extra_body_params"])
    assert set(vo.GENERATION_EXTRA) <= known
    generation_default = {key: entries[0]["default"] for key, entries in reads.items()}  # first read: generation
    assert generation_default["use_system_prompt"] == "False"
    assert {e["default"] for e in reads["use_system_prompt"]} == {"False", "is_v2v"}  # video2video: on
    assert vo.use_system_prompt_default("video2video") and not vo.use_system_prompt_default("text2video")
    for key in ("use_resolution_template", "use_duration_template"):
        assert ast.literal_eval(generation_default[key]) is vo.GENERATION_EXTRA[key]
        assert ast.literal_eval(reads[key][1]["default"]) is vo.TRANSFER_EXTRA[key]
    negative = [ast.literal_eval(e["default"]) for e in reads["negative_metadata_mode"]]
    assert negative == [vo.GENERATION_EXTRA["negative_metadata_mode"], vo.TRANSFER_EXTRA["negative_metadata_mode"]]
    assert reads["guidance_interval"][0]["default"] == "default_guidance_interval"


def test_vllm_request_fields_exist_on_the_real_models(vllm_contract):
    image = vllm_contract["schemas"]["ImageGenerationRequest"]["properties"]
    form = {f["name"] for f in vllm_contract["video_form_fields"]}
    assert set(vo.IMAGE_FIELDS) <= set(image)
    assert set(vo.VIDEO_FIELDS) | set(vo.VIDEO_FILES) <= form
    assert _enum(vllm_contract["schemas"]["ImageGenerationRequest"], "response_format") == ["b64_json", "url",
                                                                                            "file"]
    for name, (low, high) in vo.LIMITS.items():
        limits = image[name].get("anyOf", [image[name]])
        numeric = next(o for o in limits if o.get("type") in ("integer", "number"))
        assert (numeric["minimum"], numeric["maximum"]) == (low, high), name


def test_vllm_transfer_facts(vllm_contract):
    t = vllm_contract["cosmos3"]["transfer"]
    assert list(vo.HINT_KINDS) == t["TRANSFER_HINT_KEYS"]
    assert {k: sorted(v) for k, v in vo.HINT_FIELDS.items()} == t["_TRANSFER_HINT_FIELDS"]
    assert sorted(vo.EDGE_PRESETS) == sorted(t["EDGE_PRESETS"])
    assert sorted(vo.BLUR_PRESETS) == sorted(t["BLUR_DOWNUP_PRESETS"])
    assert dict(vo.TRANSFER_SAMPLE_DEFAULTS) == t["TRANSFER_SAMPLE_DEFAULTS"]
    assert {k: dict(v) for k, v in vo.HINT_TUNED_DEFAULTS.items()} == t["TRANSFER_DEFAULTS"]


def test_vllm_job_statuses(vllm_contract):
    schema = vllm_contract["schemas"]["VideoResponse"]
    assert list(vo.JOB_STATUSES) == schema["$defs"]["VideoGenerationStatus"]["enum"]


# ---------------------------------------------------------------------------------------------- diffusers


def test_diffusers_defaults(diffusers_contract):
    call = diffusers_contract["Cosmos3OmniPipeline.__call__"]
    for key, value in dif.CALL_DEFAULTS.items():
        assert call[key] == (list(value) if isinstance(value, tuple) else value), key
    init = diffusers_contract["Cosmos3OmniPipeline.__init__"]
    assert {key: init[key] for key in dif.CONFIG_DEFAULTS} == dict(dif.CONFIG_DEFAULTS)


def test_framework_video_quality_is_imageio_ffmpegs_crf():
    """vision.mp4's quality: video_save_quality q goes to imageio as ``quality``; imageio-ffmpeg 0.8.1
    (_io.py:540-545) writes ``-crf int((1 - q/10) * 51)``. The framework's default 10 is lossless."""
    assert [fw.video_crf(q) for q in (10, 9, 8, 5, 1)] == [0, 5, 10, 25, 45]
    assert fw.video_crf(fw.PROMPT_DEFAULTS["video_save_quality"]) == 0


def test_the_readme_carries_the_generated_defaults_table():
    assert defaults_table() in (REPO / "README.md").read_text(encoding="utf-8")
