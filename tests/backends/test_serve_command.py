"""serve_command and curl_command: the `vllm serve ... --omni` line, checked before anything runs, and the `curl`
line that sends what the client sends."""

from __future__ import annotations

import http.server
import json
import shlex
import shutil
import subprocess
import threading

import pytest

from cosmos_helpers import GenerationRequest
from cosmos_helpers.backends.vllm_serve import curl_command, serve_command
from cosmos_helpers.errors import ValidationError
from cosmos_helpers.protocol import vllm_omni as proto
from tests.backends.vllm_fake import FakeServer, client_for, parse_form, request_form


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


def test_only_flags_vllm_omni_reads_for_cosmos3():
    """``--allowed-local-media-path /`` is read only by chat/speech handlers in 0.30.0: it opened the disk for
    nothing."""
    command = serve_command("nvidia/Cosmos3-Super", 8, tensor_parallel=2, cfg_parallel=2, ulysses=2,
                            layerwise_offload=True, api_key="k", served_model_name="cosmos", guardrails=False)
    flags = [part for part in command.argv if part.startswith("--")]
    assert "--allowed-local-media-path" not in flags
    assert set(flags) <= set(proto.SERVE_FLAGS) and len(flags) == len(set(flags))
    assert command.argv[command.argv.index("--model-class-name") + 1] == proto.PIPELINE_CLASS


# curl, as printed for users: it sends what the client sends -----------------------------------------------


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str, str, str, bytes]] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).seen.append((self.path, self.headers.get("Authorization", ""), self.headers["Content-Type"], body))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


@pytest.fixture
def recorder():
    _Recorder.seen = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", _Recorder.seen
    httpd.shutdown()
    httpd.server_close()


def _client_sent(request):
    server = FakeServer()
    client_for(server).generate(request)
    return next(r for r in server.requests if r.method == "POST")


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_printed_curl_sends_what_the_client_sends(recorder, assets, tmp_path, monkeypatch):
    url, seen = recorder
    monkeypatch.setenv("COSMOS3_VLLM_API_KEY", "secret-key")
    caption = {"scene": "a workshop; tools <on> the bench @ noon", "fps": 24}
    video = GenerationRequest(mode="t2v", prompt=caption, negative_prompt="blurry", sound=True, use_system_prompt=True,
                              num_inference_steps=2)
    image = GenerationRequest(mode="t2i", prompt="a kettle", guidance_interval=(500, 1000), num_inference_steps=2)
    i2v = GenerationRequest(mode="i2v", prompt="a rolling ball", image=assets / "images/rolling_ball.png")
    for request in (video, image, i2v):
        command = curl_command(url, request, output=str(tmp_path / "out"))
        assert "secret-key" not in command and "$COSMOS3_VLLM_API_KEY" in command
        subprocess.run(["bash", "-c", command], check=True, timeout=60, capture_output=True)
        path, auth, content_type, body = seen[-1]
        sent = _client_sent(request)
        assert path == sent.url.path and auth == "Bearer secret-key"
        if request.resolve().mode == "text2image":
            assert json.loads(body) == json.loads(sent.read())
            continue
        fields, files = parse_form(content_type, body)
        client_fields, client_files = request_form(sent)
        assert fields == client_fields and set(files) == set(client_files)
    # the one difference, said in the printed note: the client crops the image to the output aspect first
    assert files["input_reference"][1] == (assets / "images/rolling_ball.png").read_bytes()
    assert "crop the image to 160:96" in curl_command(url, i2v)


# step caching: a server setting, printed with vLLM-Omni 0.30.0's own flags and keys --------------------------------


def test_the_step_cache_is_vllm_omnis_cache_backend_and_config():
    from cosmos_helpers import SeaCache

    from ..contracts.conftest import load

    real = load("step_cache")["vllm_omni"]
    command = serve_command("nvidia/Cosmos3-Nano", step_cache=SeaCache(threshold=0.3, residual_order=0,
                                                                        max_consecutive=3, power_exp=2.5))
    argv = command.argv
    assert argv[argv.index("--cache-backend") + 1] == "sea_cache" and "sea_cache" in real["cache_backends"]
    config = json.loads(argv[argv.index("--cache-config") + 1])
    assert config == {"sea_threshold": 0.3, "sea_residual_order": 0, "sea_max_consecutive_cached": 3,
                      "sea_power_exp": 2.5}
    assert set(config) == set(real["sea_cache_keys"])  # exactly the keys the SeaCache adapter reads
    assert shlex.split(command.shell()) == argv and set(p for p in argv if p.startswith("--")) <= set(proto.SERVE_FLAGS)
    plain = serve_command("nvidia/Cosmos3-Nano", step_cache=SeaCache()).argv  # vLLM-Omni's defaults: no config
    assert plain[-2:] == ["--cache-backend", "sea_cache"] and "--cache-config" not in plain
    assert serve_command("nvidia/Cosmos3-Nano", step_cache="off").argv[-2:] == ["--cache-backend", "none"]
    assert "--cache-backend" not in serve_command("nvidia/Cosmos3-Nano").argv
    with pytest.raises(ValidationError) as caught:  # vLLM-Omni always computes its first step
        serve_command("nvidia/Cosmos3-Nano", step_cache=SeaCache(retention_steps=2))
    assert caught.value.field == "step_cache.retention_steps"
