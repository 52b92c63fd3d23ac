"""The stand-in's step cache: vLLM-Omni's ``--cache-backend`` / ``--cache-config`` (keys and defaults held to the
wheel, ``tests/contracts/fixtures/step_cache-*.json``), refused at start where it cannot follow, given to every
request and run by diffusers' SeaCache hooks, and reported in its log and its ``/v1/models`` card."""

from __future__ import annotations

import httpx
import pytest

from cosmos_helpers import SeaCache
from cosmos_helpers.backends.vllm_omni import VllmOmniBackend
from cosmos_helpers.errors import ValidationError
from cosmos_helpers.standins.vllm_omni.settings import server_cache

from ..contracts.conftest import load
from .doubles import InstantBackend

REAL = load("step_cache")["vllm_omni"]


def test_the_flags_give_the_cache_every_request_runs():
    assert server_cache("none", None) is None and server_cache(None, None) is None  # vLLM-Omni's default
    assert server_cache("sea_cache", None) == SeaCache()  # vLLM-Omni's own defaults for every key
    chosen = server_cache("sea_cache", '{"sea_threshold": 0.3, "sea_residual_order": 0, '
                                       '"sea_max_consecutive_cached": 0, "sea_power_exp": 2.0}')
    assert chosen == SeaCache(threshold=0.3, residual_order=0, max_consecutive=0, power_exp=2.0)
    assert set(REAL["sea_cache_keys"]) == {"sea_threshold", "sea_residual_order", "sea_max_consecutive_cached",
                                           "sea_power_exp"}


@pytest.mark.parametrize(("backend", "config", "field", "words"), [
    ("fast_cache", None, "--cache-backend", "unsupported cache backend"),  # vLLM-Omni's selector refuses it too
    ("tea_cache", None, "--cache-backend", "SeaCache only"),  # vLLM-Omni runs it; the stand-in cannot
    ("sea_cache", '{"threshold": 0.3}', "--cache-config", "unknown key(s) threshold"),  # vLLM-Omni would ignore it
    ("sea_cache", '{"sea_threshold": 0.3', "--cache-config", "not JSON"),
    ("sea_cache", '[0.3]', "--cache-config", "JSON object"),
    ("none", '{"sea_threshold": 0.3}', "--cache-config", "unused"),
    ("sea_cache", '{"sea_residual_order": 2}', "--cache-config sea_residual_order", "order 0 or 1"),
    ("sea_cache", '{"sea_threshold": -1}', "--cache-config sea_threshold", "at least 0"),
])
def test_what_the_stand_in_cannot_follow_is_refused_at_start(backend, config, field, words):
    assert "tea_cache" in REAL["cache_backends"] and REAL["unknown_keys_kept"]  # the real server's behaviour
    with pytest.raises(ValidationError) as caught:
        server_cache(backend, config)
    assert caught.value.field == field and words in str(caught.value) and caught.value.fix


def test_serve_starts_with_the_cache_and_logs_it_as_vllm_omni_does(monkeypatch, capsys):
    import uvicorn

    from cosmos_helpers import cli
    from cosmos_helpers.standins.vllm_omni.cli import run

    monkeypatch.setattr(uvicorn.Server, "run", lambda self: None)  # nothing is bound
    args = cli.build_parser().parse_args(["serve", "--port", "1", "--cache-backend", "sea_cache", "--cache-config",
                                          '{"sea_threshold": 0.3}'])
    assert run(args, backend=InstantBackend()) == 0
    assert "SeaCache enabled (threshold=0.3, residual_order=1, max_consecutive_cached=2, power_exp=3.0)" in \
        capsys.readouterr().out
    assert cli.main(["serve", "--cache-backend", "mag_cache"]) == 1  # before anything loads: one line
    assert "--cache-backend: mag_cache: the stand-in runs SeaCache only" in capsys.readouterr().err


class _Spy:
    """The tiny DiffusersBackend, keeping what each generation ran with."""

    def __init__(self, backend) -> None:
        self.backend, self.made = backend, []

    def generate(self, request, **kwargs):
        generation = self.backend.generate(request, **kwargs)
        self.made.append(generation)
        return generation

    def __getattr__(self, name):
        return getattr(self.backend, name)


@pytest.mark.slow
def test_every_request_runs_the_servers_cache_and_the_manifest_says_so(tmp_path, tiny_backend):
    from cosmos_helpers import GenerationRequest
    from cosmos_helpers.standins.vllm_omni.local import ThreadedServer

    spy = _Spy(tiny_backend)
    cache = SeaCache(threshold=0.35, max_consecutive=0)
    with ThreadedServer(spy, storage_dir=tmp_path, step_cache=cache) as server, \
            VllmOmniBackend(server.url, progress=False) as client:
        card = httpx.get(f"{server.url}/v1/models").json()["data"][0]["cosmos_helpers_standin"]
        request = GenerationRequest(mode="t2i", prompt="A red ball on a grey floor.", num_inference_steps=12, seed=1)
        generation = client.generate(request)
    (made,) = spy.made
    assert made.request.step_cache == cache  # the server's cache, on a request the client sent without one
    ran = made.provenance["step_cache"]
    assert ran["method"] == "sea_cache" and 0 < ran["passes_computed"] < ran["passes"]  # CFG on part of the steps
    said = {"cache_backend": "sea_cache", "cache_config": {"sea_threshold": 0.35, "sea_max_consecutive_cached": 0},
            "values": cache.values_for("vllm-omni")}
    assert card["step_cache"] == said
    assert generation.standin["step_cache"] == said and generation.provenance["step_cache"]["server"] == said
