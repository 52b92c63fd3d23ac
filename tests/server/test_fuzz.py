"""Schemathesis against the server's own OpenAPI schema: no 5xx, no crash, every error in vLLM's envelope.

The schema is FastAPI's own, generated from the stand-in's request and response models. The server is a real
uvicorn on loopback (ThreadedServer) with tight limits and the model-free ``InstantBackend`` (behind a guardrail
double), so valid requests run the whole generation path (translation, the serial worker, MP4 encoding, the
answer) in milliseconds. Examples are bounded (``FUZZ_EXAMPLES`` per operation, positive and
negative generation, deterministic) and the run takes well under a minute on 2 cores.
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from cosmos_helpers.standins.vllm_omni.app import create_app

from .doubles import Guarded, InstantBackend

FUZZ_EXAMPLES = int(os.environ.get("COSMOS_FUZZ_EXAMPLES", "60"))
LIMITS = dict(max_output_pixels=64 * 64, max_output_frames=17, max_queue=64, job_ttl=30, max_prompt_chars=4096,
              max_field_bytes=256 * 1024, max_request_bytes=4 * 1024 * 1024, max_image_pixels=512 * 512)

STATS = {"requests": 0, "by_status": {}, "generations": 0}
BACKEND = InstantBackend()
APP = create_app(Guarded(BACKEND, "forbiddenword"), guardrails=True, sync_timeout=60, **LIMITS)
schema = schemathesis.openapi.from_dict(APP.openapi())
schema.config.generation.update(modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE], max_examples=FUZZ_EXAMPLES,
                                deterministic=True, no_shrink=True, database="none")


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    from cosmos_helpers.standins.threaded import ThreadedApp

    with ThreadedApp(APP, ready_timeout=60) as server:  # the module's app: the schema came from it
        yield server
    print(f"\nfuzz: {STATS['requests']} requests, statuses {dict(sorted(STATS['by_status'].items()))}, "
          f"{BACKEND.calls} generations")


def well_formed_error(response, case) -> None:
    """An error is vLLM's envelope with a matching code, or (a failed job's GET) the job record."""
    status = response.status_code
    if status < 400:
        return
    body = response.json()
    if case.path == "/v1/videos/{job_id}" and case.method == "GET" and body.get("object") == "video":
        assert body["status"] == "failed" and body["error"]["code"] == status
        return
    assert set(body) == {"error"}, body
    error = body["error"]
    assert {"message", "type", "param", "code"} <= set(error), error
    assert error["code"] == status and isinstance(error["message"], str) and error["message"]
    if status == 429:
        assert int(response.headers["retry-after"]) >= 1


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck), max_examples=FUZZ_EXAMPLES)
def test_fuzz_openapi(case, live):
    response = case.call(base_url=live.url, timeout=60)
    STATS["requests"] += 1
    STATS["by_status"][response.status_code] = STATS["by_status"].get(response.status_code, 0) + 1
    case.validate_response(response, checks=[not_a_server_error])
    well_formed_error(response, case)


def test_fuzz_covered_every_route_and_the_generation_path(live):
    """Runs after the fuzz (file order): it sent requests, some generated, the server is still healthy."""
    import httpx

    assert STATS["requests"] >= 100, STATS
    assert BACKEND.calls >= 3, "the fuzz never reached the generation path"
    assert httpx.get(f"{live.url}/health", timeout=10).json() == {"status": "healthy"}
