"""serve_command: the `vllm serve ... --omni` line for a real deployment, checked before anything runs."""

from __future__ import annotations

import shlex

import pytest

from cosmos_helpers.backends.vllm_omni import serve_command
from cosmos_helpers.errors import ValidationError


def test_single_gpu_nano():
    command = serve_command("nvidia/Cosmos3-Nano", 1)
    assert command.argv[:4] == ["vllm", "serve", "nvidia/Cosmos3-Nano", "--omni"]
    assert "--model-class-name" in command.argv and "Cosmos3OmniDiffusersPipeline" in command.argv
    assert command.argv[command.argv.index("--port") + 1] == "8000"
    assert command.argv[command.argv.index("--init-timeout") + 1] == "1800"
    assert "--tensor-parallel-size" not in command.argv
    assert shlex.split(command.shell()) == command.argv


def test_super_on_four_gpus_defaults_to_tensor_parallel():
    command = serve_command("nvidia/Cosmos3-Super", 4, layerwise_offload=True, port=9000)
    assert command.argv[command.argv.index("--tensor-parallel-size") + 1] == "4"
    assert "--enable-layerwise-offload" in command.argv and "9000" in command.argv


def test_cfg_parallel_and_ulysses_combine():
    command = serve_command("nvidia/Cosmos3-Super", 8, tensor_parallel=2, cfg_parallel=2, ulysses=2)
    argv = command.argv
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    assert argv[argv.index("--cfg-parallel-size") + 1] == "2"
    assert argv[argv.index("--ulysses-degree") + 1] == "2"


@pytest.mark.parametrize("kwargs,field", [
    (dict(gpus=2, tensor_parallel=4), "tensor_parallel"),
    (dict(gpus=4, tensor_parallel=2, cfg_parallel=2, ulysses=2), "tensor_parallel"),
    (dict(gpus=2, cfg_parallel=2, ulysses=2), "cfg_parallel"),
    (dict(gpus=1, ulysses=2), "ulysses"),
    (dict(gpus=4, cfg_parallel=4), "cfg_parallel"),
    (dict(gpus=0), "gpus"),
    (dict(gpus=1, port=0), "port"),
    (dict(gpus=1, tensor_parallel=1.5), "tensor_parallel"),
])
def test_parallel_degrees_must_fit(kwargs, field):
    with pytest.raises(ValidationError) as caught:
        serve_command("nvidia/Cosmos3-Super", **kwargs)
    assert caught.value.field == field


def test_api_key_is_never_printed_and_docker_wraps():
    command = serve_command("nvidia/Cosmos3-Nano", 1, api_key="very-secret")
    assert "very-secret" not in command.shell()
    assert "--api-key" in command.argv and "$COSMOS3_VLLM_API_KEY" in command.argv
    docker = command.docker()
    assert docker.startswith("docker run") and "--gpus all" in docker and "vllm/vllm-omni:cosmos3" in docker
    assert docker.endswith(command.shell()) and "-p 8000:8000" in docker
    assert "--no-guardrails" in serve_command("m/x", 1, guardrails=False).argv


def test_docker_flag_changes_the_printed_form():
    command = serve_command("nvidia/Cosmos3-Nano", 1, docker=True)
    assert str(command).startswith("docker run") and command.argv[0] == "vllm"
