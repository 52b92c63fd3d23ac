"""Action-conditioned generation as the three upstream stacks define it: modes, embodiments, widths, sizes.

*Forward dynamics*: a start image and actions in, the video out. *Inverse dynamics*: a video in, its actions out.
*Policy* (the framework's ``wam``): a start image and an instruction in, video and actions out. A chunk of ``chunk``
actions pairs with ``chunk + 1`` frames. A row is one step of the embodiment's *raw* action vector (diffusers
pipeline_cosmos3_omni.py:247-262): a 9-D pose delta (translation + the first two rotation-matrix columns: the
framework's ``convert_rotation``, data/generator/action/utils/pose_utils.py:117,183-184,209) and a grasp state (1-D
gripper, or 15-D fingertips per hand); the model zero-pads rows to its ``action_dim`` and picks per-embodiment
weights by a domain id.

Sources, checked against ``tests/contracts/fixtures/action_facts-*.json`` (``scripts/refresh_contracts.py``):

* diffusers 0.42.1 ``pipelines/cosmos/pipeline_cosmos3_omni.py``: ``_ACTION_RESOLUTION_BINS`` :187,
  ``_ACTION_VIEWPOINT_TEMPLATES`` :220, ``_EMBODIMENT_TO_DOMAIN_ID`` :227, ``_EMBODIMENT_TO_RAW_ACTION_DIM`` :263,
  ``CosmosActionCondition`` :302 (width checked :392; ``height``/``width``/``num_frames`` must be ``None`` :1041-1044;
  ``action_gen=True`` :1051).
* cosmos-framework 5eee9ed ``data/generator/action/utils/domain_utils.py`` (``EMBODIMENT_TO_DOMAIN_ID`` :6,
  ``EMBODIMENT_TO_RAW_ACTION_DIM`` :34), ``inference/action.py`` (a JSON ``[T][D]`` array, :56-58),
  ``inference/args.py`` (``ModelMode.WAM`` :168; sample fields :593-597),
  ``data/generator/action/action_normalization.py`` (quantile :33-36, meanstd :37-38, minmax :39-42; training only:
  inference passes ``action_normalizer=None``, inference/action.py:148).
* vllm-omni 0.30.0 ``diffusion/models/cosmos3/action.py`` (``ACTION_MODES`` :20-28, ``EMBODIMENT_TO_DOMAIN_ID``
  :31) and ``pipeline_cosmos3.py`` (``extra_args``; defaults 30 steps, guidance 1.0, shift 5.0 :3842-3844; policy /
  inverse dynamics need ``raw_action_dim`` :2644-2647).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from .framework import SIZES
from .vllm_omni import closest_bucket

MODES: tuple[str, ...] = ("forward_dynamics", "inverse_dynamics", "policy")
# The framework's model_mode for each (args.py:166-168: "wam" is its name for the policy task).
FRAMEWORK_MODES: Mapping[str, str] = MappingProxyType(
    {"forward_dynamics": "forward_dynamics", "inverse_dynamics": "inverse_dynamics", "policy": "wam"})
# What each mode is given (the rest it predicts).
GIVES_ACTIONS: frozenset[str] = frozenset({"forward_dynamics"})
PREDICTS_ACTIONS: frozenset[str] = frozenset({"inverse_dynamics", "policy"})
TAKES_VIDEO: frozenset[str] = frozenset({"inverse_dynamics"})

POSE_DIM = 9  # 3-D translation + 6-D rotation
TRANSLATION = slice(0, 3)
ROTATION_6D = slice(3, 9)

DIFFUSERS_DOMAIN_ID: Mapping[str, int] = MappingProxyType({
    "no_action": 0, "av": 1, "camera_pose": 2, "hand_pose": 3, "pusht": 4, "libero": 5, "umi": 6,
    "bridge_orig_lerobot": 7, "droid_lerobot": 8, "robomind-franka": 8, "galbot": 9, "robomind-franka-dual": 12,
    "robomind-ur": 13, "agibotworld": 15, "agibot_gear_gripper": 15, "agibot_gear_gripper_ext": 15, "fractal": 20,
})
DIFFUSERS_RAW_DIM: Mapping[str, int] = MappingProxyType({
    "av": 9, "camera_pose": 9, "pusht": 2, "umi": 10, "bridge_orig_lerobot": 10, "droid_lerobot": 10,
    "robomind-franka": 10, "robomind-franka-dual": 20, "robomind-ur": 10, "galbot": 30, "agibotworld": 29,
    "agibot_gear_gripper": 29, "agibot_gear_gripper_ext": 29, "fractal": 10, "hand_pose": 57,
})
# cosmos-framework domain_utils.py:6 / :34 (libero and hand_pose size their width per dataset: absent).
FRAMEWORK_DOMAIN_ID: Mapping[str, int] = MappingProxyType({
    "no_action": 0, "av": 1, "camera_pose": 2, "hand_pose": 3, "pusht": 4, "libero": 5, "umi": 6,
    "bridge_orig_lerobot": 7, "droid_lerobot": 8, "robomind-franka": 8, "embodiment_b": 9,
    "robomind-franka-dual": 12, "robomind-ur": 13, "agibotworld": 15, "embodiment_c_gripper": 15,
    "embodiment_c_gripper_ext": 15, "xdof_yam": 16, "molmoact2_yam": 16, "abc_yam": 16, "robotwin": 17,
    "fractal": 20, "drawanything": 21, "behavior1k_lerobot": 22, "maniparena": 23,
})
FRAMEWORK_RAW_DIM: Mapping[str, int] = MappingProxyType({
    "av": 9, "camera_pose": 9, "pusht": 2, "umi": 10, "bridge_orig_lerobot": 10, "droid_lerobot": 10,
    "robomind-franka": 10, "robomind-franka-dual": 20, "robomind-ur": 10, "embodiment_b": 30, "agibotworld": 29,
    "embodiment_c_gripper": 29, "embodiment_c_gripper_ext": 29, "xdof_yam": 20, "molmoact2_yam": 20,
    "abc_yam": 20, "maniparena": 20, "robotwin": 14, "fractal": 10, "drawanything": 3, "behavior1k_lerobot": 23,
})
# vllm-omni action.py:31 (no width table: the client sends raw_action_dim): the framework's names without robotwin,
# plus the older names galbot and agibot_gear_gripper(_ext).
VLLM_DOMAIN_ID: Mapping[str, int] = MappingProxyType({
    **{k: v for k, v in FRAMEWORK_DOMAIN_ID.items() if k != "robotwin"}, "galbot": 9, "agibot_gear_gripper": 15,
    "agibot_gear_gripper_ext": 15,
})
# Every embodiment some backend can run, with its raw width (the two tables agree where both list one).
RAW_DIM: Mapping[str, int] = MappingProxyType({**FRAMEWORK_RAW_DIM, **DIFFUSERS_RAW_DIM})

# diffusers :187: action resolution tier -> {h/w ratio: (height, width)}; the input is fitted (never upscaled)
# and padded into the closest-ratio canvas. The canvases are the framework's sizes of these tiers.
RESOLUTION_BINS: Mapping[str, Mapping[str, tuple[int, int]]] = MappingProxyType({
    tier: MappingProxyType({str(h / w): (h, w) for w, h in SIZES[tier].values()})
    for tier in ("256", "480", "704", "720")})
TIERS: tuple[str, ...] = tuple(RESOLUTION_BINS)
# Training data only (module docstring): a trajectory is given and predicted in raw units.
NORMALIZATION: tuple[str, ...] = ("quantile", "meanstd", "minmax")
# diffusers :220: the action model was trained with these framing sentences; "ego_view" is the default.
VIEW_POINTS: tuple[str, ...] = ("ego_view", "third_person_view", "wrist_view", "concat_view")
DEFAULT_VIEW_POINT = "ego_view"

# Clip timing per embodiment, (chunk, fps): the framework's example inputs (inputs/omni/action_*.json: av, camera_pose,
# bridge) and its dataset loaders' defaults (datasets/droid_lerobot_dataset.py:83-84, umi_lerobot_dataset.py:67-68,
# bridge_orig_lerobot_dataset.py). A DROID chunk is 16 steps at 15 fps; UMI's loader defaults to 10 fps.
TIMING: Mapping[str, tuple[int, float]] = MappingProxyType({
    "av": (60, 10.0), "camera_pose": (60, 30.0), "bridge_orig_lerobot": (16, 5.0), "droid_lerobot": (16, 15.0),
    "umi": (16, 10.0)})

# vllm-omni pipeline_cosmos3.py:3842-3844: an action request's defaults when it leaves them out.
VLLM_DEFAULTS: Mapping[str, float] = MappingProxyType(
    {"num_inference_steps": 30, "guidance_scale": 1.0, "flow_shift": 5.0})
# The extra_params keys the vLLM-Omni Cosmos3 pipeline reads for an action request (pipeline_cosmos3.py:342,
# :1723, :2636, :3825, :3864, :3959, :3111).
VLLM_EXTRA_KEYS: tuple[str, ...] = ("action_mode", "domain_name", "action_chunk_size", "action", "raw_action_dim",
                                    "action_fps", "resolution")


def closest_bin(tier: str, height: int, width: int) -> tuple[int, int]:
    """``(height, width)`` of the tier's canvas whose ratio is closest to the input's (diffusers'
    ``VideoProcessor.classify_height_width_bin``: the first of equally close ratios wins), vLLM-Omni's rule too."""
    return closest_bucket(width, height, str(tier))[::-1]


def output_size(tier: str, height: int, width: int, spatial: int = 16) -> tuple[int, int]:
    """``(height, width)`` of the video an action run makes from a ``height x width`` input: the input is scaled
    down (never up) into the closest canvas, padded, and the padding dropped again after denoising, down to whole
    latent pixels (diffusers ``_prepare_action_video_conditioning`` :704-752 and
    ``_remove_action_video_padding_from_latent`` :754-770)."""
    target_h, target_w = closest_bin(tier, height, width)
    scale = min(target_w / width, target_h / height, 1.0)
    content_h, content_w = max(1, int(scale * height + 0.5)), max(1, int(scale * width + 0.5))
    return max(content_h // spatial, 1) * spatial, max(content_w // spatial, 1) * spatial
