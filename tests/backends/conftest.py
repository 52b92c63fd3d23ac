"""Fixtures of the client tests: the fake vLLM-Omni server (real httpx over a MockTransport) and a client for it."""

from __future__ import annotations

import pytest

from cosmos_helpers.backends.vllm_omni import VllmOmniBackend
from tests.backends.vllm_fake import FakeServer, client_for


@pytest.fixture
def server() -> FakeServer:
    return FakeServer()


@pytest.fixture
def client(server) -> VllmOmniBackend:
    with client_for(server) as backend:
        yield backend
