"""diffusers 0.42.1's ``Cosmos3OmniPipeline`` defaults: what the in-process backend does with an option left out.

From ``pipelines/cosmos/pipeline_cosmos3_omni.py`` (``__call__`` at :1318, ``__init__`` at :419); checked against
``tests/contracts/fixtures/diffusers-0.42.1.json`` (read from the installed package).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

VERSION = "0.42.1"

CALL_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "num_inference_steps": 35,
    "guidance_scale": 6.0,
    "fps": 24.0,
    "num_frames": None,  # required: check_inputs raises "`num_frames` must be provided" (:1060) without it
    "negative_prompt": None,  # the pipeline uses "" (no negative caption)
    "use_system_prompt": None,  # the pipeline config's default_use_system_prompt
    "add_resolution_template": True,
    "add_duration_template": True,
    "condition_frame_indexes_vision": (0, 1),
    "condition_video_keep": "first",
})
CONFIG_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    # A checkpoint's model_index.json may set its own; the embedded tiny model keeps these.
    "default_use_system_prompt": True,
    "use_native_flow_schedule": False,
})
