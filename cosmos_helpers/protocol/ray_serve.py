"""The Cosmos Framework's Ray Serve app (cosmos-framework 5eee9ed ``inference/ray/serve.py``), as this package uses it.

A router deployment (FastAPI ingress) before one autoscaling deployment per model, each replica a placement group
of ``world_size`` GPU workers. ``POST /generate`` takes an ``OmniSampleOverrides`` body (``model`` picks the
deployment, the first when left out; unknown: 404 listing the served ones) and answers ``SampleOutputs`` (``args``,
``status``, ``message``, ``stack_trace``, ``outputs``: ``content`` and ``files`` relative to ``output_dir``);
``GET /models``, ``GET /info``, ``GET /outputs/<path>`` (``StaticFiles``). The setup (``OmniSetupOverrides`` under
``models.<name>.setup``) belongs to the deployment: ``diffusion_cache`` and ``keep_going`` are off there (a failing
sample is an HTTP 500, not ``status: "error"``). Checked against ``tests/contracts/fixtures/ray_serve-5eee9ed.json``
(``scripts/refresh_contracts.py --only ray-serve``).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

COMMIT = "5eee9ed"
APP_NAME = "cosmos3_omni"
MODELS, INFO, GENERATE, OUTPUTS = "/models", "/info", "/generate", "/outputs"
ROUTES: tuple[tuple[str, str], ...] = (("GET", MODELS), ("GET", INFO), ("POST", GENERATE))
STATUSES: tuple[str, ...] = ("success", "error", "skip")
INFO_KEYS: tuple[str, ...] = ("environment", "models", "output_dir")
ENVIRONMENT_KEYS: tuple[str, ...] = ("cosmos3_version", "commit_sha")
UNKNOWN_MODEL_STATUS = 404
SEED_RANGE: tuple[int, int] = (0, 10000)  # random.randint(0, 10000) for a sample without a seed
OUTPUT_FOLDER_PREFIX = "generate_"  # generate_<%Y%m%d_%H%M%S>_<uuid4 hex[:4]>, under the app's output_dir
TIMESTAMP_FORMAT = "%Y%m%d_%H%M%S"
# What the deployments are given in serve.py (and what the stand-in sizes the same way where it can).
MAX_BATCH_SIZE = 1
BATCH_WAIT_TIMEOUT_S = 0.01
BATCH_TIMEOUT_S = 300.0  # asyncio.wait_for around one batch on the workers
HEALTH_CHECK_TIMEOUT_S = 300
WORKER_BUNDLE: Mapping[str, int] = MappingProxyType({"GPU": 1, "CPU": 1})  # one per rank of world_size
# The setup defaults that decide what a request cannot ask for itself (OmniSetupOverrides and its bases).
SETUP_DEFAULTS: Mapping[str, object] = MappingProxyType({
    "diffusion_cache": False, "guardrails": True, "keep_going": False, "skip_invalid_samples": False})
# The deploy configs shipped with the framework: both serve Cosmos3-Nano without guardrails.
CONFIGS: tuple[str, ...] = ("latency.yaml", "throughput.yaml")
CONFIG_DIR = "cosmos_framework/inference/ray/configs"
CONFIG_MODEL = "Cosmos3-Nano"
CONFIG_SETUP: Mapping[str, Mapping[str, object]] = MappingProxyType({
    config: MappingProxyType({"checkpoint_path": CONFIG_MODEL, "guardrails": False,
                              "parallelism_preset": config.removesuffix(".yaml")}) for config in CONFIGS})
CONFIG_OUTPUT_DIR = "outputs/ray_serve"
SUBMIT_MODULE = "cosmos_framework.inference.ray.submit"
SUBMIT_PORT = 8000
SUBMIT_TIMEOUT_S = 600
STEP_CACHE_DEFAULT = ("the served setup's diffusion_cache (OmniSetupOverrides default: off; the framework's "
                      "latency.yaml / throughput.yaml leave it unset)")


def cluster_commands(config: str = "throughput.yaml", *, head: str = "HEAD_HOST", port: int = 6379) -> list[str]:
    """The command lines of a real multi-node run of the framework's app, in order (run in a framework checkout)."""
    if config not in CONFIGS:
        raise ValueError(f"{config!r} is not one of the framework's serve configs {CONFIGS}")
    return [f"ray start --head --port {port}                     # on the head node",
            f"ray start --address {head}:{port}                  # on every other GPU node",
            f"serve run {CONFIG_DIR}/{config}   # on the head node: one replica per world_size GPUs",
            f"python -m {SUBMIT_MODULE} -i inputs/omni/t2v.json -o outputs/submitted --host {head} --port "
            f"{SUBMIT_PORT}"]
