"""diffusers 0.42.1's ``Cosmos3OmniPipeline`` defaults: what the in-process backend does with an option left out.

From ``pipelines/cosmos/pipeline_cosmos3_omni.py`` (``__call__`` at :1318, ``__init__`` at :419). ``CALL_DEFAULTS``
is the signature, checked against ``tests/contracts/fixtures/diffusers-0.42.1.json``; ``LEFT_OUT`` is what the
call then uses, checked against ``diffusers_behaviour-0.42.1.json``, measured by running the real pipeline with
the options left out (``scripts/refresh_contracts.py --only diffusers-behaviour``).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

VERSION = "0.42.1"

CALL_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "num_inference_steps": 35,
    "guidance_scale": 6.0,
    "fps": 24.0,
    "num_frames": None,  # not required: without an action, __call__ fills in LEFT_OUT's 189 (:1468-1474)
    "height": None,  # likewise 720
    "width": None,  # likewise 1280
    "negative_prompt": None,  # the pipeline uses "" (no negative caption)
    "use_system_prompt": None,  # the pipeline config's default_use_system_prompt
    "add_resolution_template": True,
    "add_duration_template": True,
    "condition_frame_indexes_vision": (0, 1),
    "condition_video_keep": "first",
})
# What a call without an action uses for each option left out. The size is filled in before check_inputs, so a
# call without num_frames/height/width makes a 189-frame 1280x720 video (7.9 s at 24 fps); this project always
# sends its own size, frames, fps, steps and guidance.
LEFT_OUT: Mapping[str, Any] = MappingProxyType({
    "num_frames": 189,
    "height": 720,
    "width": 1280,
    "fps": 24.0,
    "num_inference_steps": 35,
    "guidance_scale": 6.0,  # != 1, so classifier-free guidance: two transformer passes a step
    "negative_prompt": "",
})
CONFIG_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    # A checkpoint's model_index.json may set its own; the embedded tiny model keeps these.
    "default_use_system_prompt": True,
    "use_native_flow_schedule": False,
})
