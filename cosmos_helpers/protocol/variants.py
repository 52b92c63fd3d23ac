"""The Cosmos 3 variants beside Nano/Super (distilled few-step checkpoints, Edge, image editing) in the three stacks.

``fw`` = NVIDIA/cosmos-framework 5eee9ed (in ``cosmos_framework/``), ``vo`` = the vllm-omni 0.30.0 wheel (in
``vllm_omni/diffusion/models/cosmos3/``), ``df`` = diffusers 0.42.1 (in ``diffusers/modular_pipelines/cosmos/``);
``tests/contracts/test_variant_facts.py`` reads the same facts from the ``scripts/refresh_contracts.py`` fixtures.

Distilled ("4-step") checkpoints
    * fw ``inference/args.py:1239-1280``: ``Cosmos3-Super-Text2Image-4Step`` (768, shift 5) and
      ``Cosmos3-Super-Image2Video-4Step`` (480, base_fps 16), no sound, ``fixed_step_sampler_config.t_list`` and
      ``sample_type=sde``; ``inference/inference.py:1575-1580``: the fixed-step sampler and guidance 1.0 whatever the
      sample says; ``scripts/_convert_model_to_diffusers.py:1584-1610``: exported as a ``FlowMatchEulerDiscrete
      Scheduler``, ``shift=1.0``, ``stochastic_sampling`` for ``sde``.
    * df ``before_denoise.py:1344-1370`` (``Cosmos3DistilledSetTimestepsStep``): ``len(distilled_sigmas)`` steps,
      another ``num_inference_steps`` or guidance other than 1.0 raises; ``encoders.py:450-452``: no negative prompt;
      ``modular_blocks_cosmos3_distilled.py:245-250``: text2image, text2video, image2video, video2video; no sound.
    * vo ``pipeline_cosmos3.py:998``: distilled = a ``FlowMatchEulerDiscreteScheduler``; ``:1067-1078`` the schedule
      is its config's ``t_list``; ``:1842-1849`` ``num_inference_steps`` ignored; ``:1864-1871`` guidance forced to
      1.0 with a warning, the negative prompt without effect; ``:1929-1957`` only text2image and image2video.

Edge
    * fw ``inference/configs/model/Cosmos3-Edge.yaml:111-113``: resolution 480, ``sound_gen: false``;
      ``inference/args.py:1067-1072``: 121 video frames; the defaults files' guidance 6 / shift 10 apply.
    * vo ``pipeline_cosmos3.py:194-199``: its own defaults (video 832x480, guidance 5, shift 3; image 640x640);
      ``:1959-1973`` refuses sound, transfer and video2video.
    * The backbone is Nemotron dense (vo ``transformer_cosmos3_edge.py:27``); df
      ``models/transformers/transformer_cosmos3.py:305-322`` builds it from ``hidden_act="relu2"``. fw
      ``scripts/_convert_model_to_diffusers.py:1612-1624`` exports a ``Cosmos3EdgeUniPCMultistepScheduler``, which df
      0.42.1 lacks (our backend lends its own scheduler either way).

Image to image (image editing)
    * fw ``inference/args.py:160`` ``ModelMode.IMAGE2IMAGE``; ``defaults/image2image/sample_args.json``: 35 steps,
      guidance 6, shift 5. ``inference/inference.py:619-639``: with a resolution *and* an aspect ratio the input is
      resized and centre-cropped to that bucket, else resized (LANCZOS) to a longer side of 512, both sides floored to
      multiples of 32 (``inference/vision.py:17-41``), the output that size.
    * fw ``inference/vision.py:162-182``: the batch is the input then the output;
      ``data/generator/sequence_packing/packers.py:40-56``: all but the last item clean; no shared temporal positions
      (``SequencePlan.share_vision_temporal_positions`` False), so the output starts at ``max(position) + 1``
      (``sequence_packing/mrope.py``); no fps, so integer positions. ``inference/inference.py:637`` +
      ``model/generator/omni_mot_model.py:2160-2183``: both prompts under the edit system prompt, whatever
      ``use_system_prompt`` says.
    * df 0.42.1 has no edit workflow, but its transformer takes any packed sequence of clean and noised items:
      :mod:`cosmos_helpers.backends.diffusers.edit` packs the framework's edit batch on it. vo 0.30.0
      ``pipeline_cosmos3.py:3724-3820``: an image request takes no input image; no edit path.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

# fw args.py:1257-1258 / :1276-1277: the published fixed-step schedule (flow sigmas, first to last step).
DISTILLED_T_LIST: tuple[float, ...] = (1.0, 0.9375, 0.8333333333333334, 0.625)
DISTILLED_SAMPLE_TYPE = "sde"
DISTILLED_GUIDANCE = 1.0  # guidance is baked into the weights (fw inference.py:1578, df before_denoise.py:1360)
# the exported scheduler's shift: the sigmas are used as they are (fw scripts/_convert_model_to_diffusers.py:1595)
DISTILLED_SHIFT = 1.0
DISTILLED_SCHEDULER = "FlowMatchEulerDiscreteScheduler"  # vo pipeline_cosmos3.py:201
DISTILLED_BLOCKS = "Cosmos3DistilledBlocks"  # df modular_pipeline.py:138
# hub id -> (framework checkpoint name, its resolution, the one mode it is published for)
DISTILLED_CHECKPOINTS: Mapping[str, tuple[str, str, str]] = MappingProxyType({
    "nvidia/Cosmos3-Super-Text2Image-4Step": ("Cosmos3-Super-Text2Image-4Step", "768", "text2image"),
    "nvidia/Cosmos3-Super-Image2Video-4Step": ("Cosmos3-Super-Image2Video-4Step", "480", "image2video"),
})
# The modes each stack runs a distilled checkpoint in.
DISTILLED_MODES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "diffusers": ("text2image", "text2video", "image2video", "video2video"),
    "vllm-omni": ("text2image", "image2video"),
    "framework": ("text2image", "image2video"),  # the two published checkpoints' modes
})

# Edge, as vLLM-Omni fills in what a request leaves out (vo pipeline_cosmos3.py:194-199); the framework's are
# the defaults files' (protocol.framework.MODE_DEFAULTS) at 480 with 121 video frames.
EDGE_VLLM_DEFAULTS: Mapping[str, object] = MappingProxyType({
    "video_size": (832, 480), "image_size": (640, 640), "guidance_scale": 5.0, "flow_shift": 3.0})
EDGE_SOUND = False  # fw Cosmos3-Edge.yaml:113 sound_gen: false; vo pipeline_cosmos3.py:1968-1969

# Image editing as the framework does it (see the module docstring).
EDIT_SYSTEM_PROMPT = "You are a helpful assistant who will edit images based on the user's instructions."
EDIT_MAX_SIZE = 512  # the longer side of an edit made without a resolution and aspect ratio
EDIT_SIZE_MULTIPLE = 32  # both sides floored to a multiple of this

# Which backends run image2image, and why the other cannot.
IMAGE2IMAGE_BACKENDS: tuple[str, ...] = ("framework", "diffusers")
IMAGE2IMAGE_REFUSAL: Mapping[str, str] = MappingProxyType({
    "vllm-omni": "vLLM-Omni 0.30.0's Cosmos3 pipeline has no image-edit path (an image request takes no input "
                 "image)",
})


def edit_size(width: int, height: int) -> tuple[int, int]:
    """The framework's output size for an edit of a ``width x height`` image given no resolution and aspect ratio:
    scaled (up or down) so the longer side is 512, each side floored to a multiple of 32 (at least 32)."""
    scale = EDIT_MAX_SIZE / max(width, height)
    m = EDIT_SIZE_MULTIPLE
    return max(int(width * scale) // m * m, m), max(int(height * scale) // m * m, m)
