"""A real uvicorn server on a free loopback port, in a background thread, backed by the tiny DiffusersBackend.

One server per test module (module scope); small requests (160x96, 9 frames, 2 steps) keep it fast.
"""

from __future__ import annotations

import pytest

SMALL = dict(width=160, height=96, num_inference_steps=2)
BLOCK_WORD = "forbiddenword"


def small_request(mode: str = "text2video", **changes):
    from cosmos_helpers import GenerationRequest

    values = dict(mode=mode, prompt="a small robot crosses a workshop", **SMALL)
    if mode != "text2image":
        values["num_frames"] = 9
    values.update(changes)
    return GenerationRequest(**values)


@pytest.fixture(scope="module")
def storage(tmp_path_factory):
    return tmp_path_factory.mktemp("server-storage")


@pytest.fixture(scope="module")
def server(storage):
    """The local vLLM-Omni-compatible app under uvicorn (thread), guardrail block word configured."""
    from cosmos_helpers.server.local import ThreadedServer

    with ThreadedServer(storage_dir=storage, block_words=(BLOCK_WORD,), sync_timeout=120) as running:
        yield running


@pytest.fixture(scope="module")
def client(server):
    from cosmos_helpers.backends.vllm_omni import VllmOmniBackend

    with VllmOmniBackend(server.url, progress=False, poll_interval=0.05, timeout=120) as backend:
        yield backend


@pytest.fixture(scope="module")
def http(server):
    import httpx

    with httpx.Client(base_url=server.url, timeout=60) as session:
        yield session
