"""NVIDIA's FP8 for Cosmos 3 in the real stack: the ModelOpt FP8 revision, its step policy, each backend's knobs.

Read from diffusers 0.42.1 (D), vLLM-Omni 0.30.0 (V, the wheel) and cosmos-framework 5eee9ed (F); checked against
``tests/contracts/fixtures/fp8-*.json`` (``scripts/refresh_contracts.py --only fp8``).

* **The checkpoint**: the hub revision ``fp8`` (D ``pipelines/cosmos/mixed_precision.py:1-26``): static per-tensor
  FP8 (E4M3) weights and activation scales (W8A8), the ModelOpt state beside them (``transformer/modelopt_state.pth``,
  restored by ``modelopt.torch.opt.enable_huggingface_checkpointing()``), and in ``transformer/config.json`` a
  ``quantization_config`` (``quant_method: modelopt``, ``quant_type: FP8``) whose ``runtime.diffusion_step_policy``
  runs some steps with 16-bit activations (W8A16): :data:`OFFICIAL_POLICY`, first and last 3 steps and the reasoner
  pathway (D ``mixed_precision.py:67-77``). Distilled checkpoints have no policy: W8A8 throughout (``:127-131``).
* **diffusers** applies it in ``Cosmos3OmniPipeline.__call__`` (D ``pipeline_cosmos3_omni.py:1349-1352`` arguments,
  ``:1709-1726`` per step, ``:1894`` reset): ``mixed_precision_format`` ``None`` = the checkpoint's policy, ``"none"``
  = W8A8 every step, ``"fp8"`` = the schedule even without a policy; step counts and the reasoner policy
  (``high_precision`` = W8A16, ``base_precision`` = native) override the checkpoint's (D ``mixed_precision.py:96-171``);
  a one-step call stays W8A8 (``:181-182``); the choices are kept in ``pipe._mixed_precision_trace`` (``:1717``,
  ``:341-343``).
* **vLLM-Omni** reads the same policy (V ``diffusion/models/cosmos3/mixed_precision/checkpoint.py:62-93``) or the
  override ``additional_config["cosmos3_mixed_precision"]`` (V ``mixed_precision/config.py:35-91``; ``enabled: false``
  takes no other field, 0/0/native is off, ``:61-90``; vLLM's ``--additional-config``, V ``engine/arg_utils.py:143``);
  the revision is ``--revision`` (V ``config/omni_config.py:810, 1115``); ``--diffusion-quantization-config``,
  ``--force-cutlass-fp8`` (SM89+) and ``--diffusion-kv-cache-dtype fp8`` (V ``entrypoints/cli/serve.py:697-714,
  962-970``). All are fixed when the server starts.
* **cosmos-framework 5eee9ed** loads a local ModelOpt FP8 folder with ``hf_quant_config.json`` (F
  ``utils/generator/quantization.py:222-237``; ``inference/model.py:670-690``) through TorchAO static FP8 on every
  step: no diffusion-step policy anywhere in the tree. ``--quantization-method mxfp8|nvfp4`` quantizes bf16 weights at
  load (F ``inference/common/args.py:725-755``; Blackwell only, not with FSDP, F ``utils/generator/model_loader.py:
  410-415``), refused with a ModelOpt checkpoint (F ``inference/model.py:671-674``).
* **ModelOpt 0.47.0**: a compressed ``RealQuantLinear`` needs a registered GEMM; its FP8 per-tensor GEMM
  (``quantization/backends/fp8_per_tensor_gemm.py:38-53, 211-214``) is never imported, so the fallback forward fails
  on the plain FP8 weight (``nn/modules/tensor_quantizer.py:1230-1240``): :mod:`cosmos_helpers.backends.diffusers.
  modelopt_fp8`.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

from .step_cache import DIFFUSERS_VERSION, FRAMEWORK_COMMIT, VLLM_OMNI_VERSION  # noqa: F401 - the versions read here

MODELOPT_VERSION = "0.47.0"  # what loads and builds the checkpoints here (pyproject's fp8 extra)

REVISION = "fp8"  # the hub revision of nvidia/Cosmos3-* with the ModelOpt FP8 weights
QUANT_METHOD = "modelopt"
QUANT_TYPE = "FP8"
MODELOPT_STATE = "modelopt_state.pth"  # beside the transformer's weights

# transformer/config.json quantization_config.runtime.diffusion_step_policy (D mixed_precision.py:53-77).
POLICY_FIELDS: tuple[str, ...] = ("schema_version", "type", "index_space", "scope", "default_mode", "first_steps",
                                  "last_steps", "overlap", "reasoner")
OFFICIAL_POLICY: Mapping[str, Any] = MappingProxyType({
    "schema_version": 1, "type": "first_last_n", "index_space": "denoising_loop_iteration", "scope": ["transformer"],
    "default_mode": "native", "first_steps": {"count": 3, "mode": "a16"}, "last_steps": {"count": 3, "mode": "a16"},
    "overlap": "a16", "reasoner": "a16"})
REASONER_MODES: tuple[str, ...] = ("a16", "native")  # the policy's words (and vLLM-Omni's)

# diffusers: our FP8 field -> Cosmos3OmniPipeline.__call__ argument (every default None: the checkpoint decides).
DIFFUSERS_CALL_ARGS: Mapping[str, str] = MappingProxyType({
    "mixed": "mixed_precision_format", "first_steps": "mixed_precision_first_steps",
    "last_steps": "mixed_precision_last_steps", "reasoner": "mixed_precision_reasoner_policy"})
DIFFUSERS_CALL_DEFAULTS: Mapping[str, Any] = MappingProxyType({name: None for name in DIFFUSERS_CALL_ARGS.values()})
DIFFUSERS_FORMATS: Mapping[bool, str] = MappingProxyType({True: "fp8", False: "none"})  # mixed -> format
DIFFUSERS_REASONER: Mapping[str, str] = MappingProxyType({"a16": "high_precision", "native": "base_precision"})
# What diffusers calls each step in the trace (D mixed_precision.py:186-189; "base" when no schedule applies).
TRACE_HIGH, TRACE_NATIVE = "W8A16", "W8A8"

# vLLM-Omni: server flags and the additional_config override.
VLLM_REVISION_FLAG = "--revision"
VLLM_ADDITIONAL_CONFIG_FLAG = "--additional-config"
VLLM_MIXED_KEY = "cosmos3_mixed_precision"
VLLM_MIXED_FIELDS: Mapping[str, str] = MappingProxyType({  # our FP8 field -> the key in cosmos3_mixed_precision
    "mixed": "enabled", "first_steps": "first_steps", "last_steps": "last_steps", "reasoner": "reasoner"})
VLLM_MIXED_DEFAULTS: Mapping[str, Any] = MappingProxyType({"enabled": True, "first_steps": 3, "last_steps": 3,
                                                           "reasoner": "a16"})
VLLM_QUANTIZATION_CONFIG_FLAG = "--diffusion-quantization-config"
VLLM_FORCE_CUTLASS_FLAG = "--force-cutlass-fp8"
VLLM_KV_CACHE_DTYPE_FLAG = "--diffusion-kv-cache-dtype"
VLLM_KV_CACHE_DTYPES: tuple[str, ...] = ("fp8", "mxfp8", "mxfp4", "float")

# The framework.
FRAMEWORK_QUANTIZATION_FLAG = "--quantization-method"
FRAMEWORK_QUANTIZATION_METHODS: tuple[str, ...] = ("mxfp8", "nvfp4")  # QuantizationMethod (args.py:731)
FRAMEWORK_QUANTIZATION_DEFAULT = None  # QuantizationOverrides.quantization_method (args.py:743)
FRAMEWORK_FP8_MARKER = "hf_quant_config.json"  # what makes a local folder a ModelOpt FP8 checkpoint there
FRAMEWORK_STEP_POLICY = False  # 5eee9ed runs ModelOpt FP8 at W8A8 on every step

# What each backend runs when the request leaves ``precision`` out: the checkpoint as named (the bf16 main revision).
BACKEND_DEFAULT: Mapping[str, str] = MappingProxyType({
    "diffusers": "the checkpoint's own weights (bf16)",
    "vllm-omni": "the server's --revision (vLLM-Omni's default: the bf16 main revision)",
    "framework": "the checkpoint's own weights (bf16); no --quantization-method",
})


def policy_schedule(first_steps: int, last_steps: int, num_steps: int) -> list[str]:
    """Which steps of ``num_steps`` run W8A16 under a first/last policy, in diffusers' trace words (overlapping
    windows are W8A16, as ``overlap: a16`` says; one step alone stays W8A8). The fixture holds diffusers' own answer
    for several step counts, so this rule is checked against it."""
    if num_steps == 1:
        return [TRACE_NATIVE]
    return [TRACE_HIGH if i < first_steps or i >= num_steps - last_steps else TRACE_NATIVE for i in range(num_steps)]
