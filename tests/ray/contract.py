"""The Ray Serve app's contract from cosmos-framework 5eee9ed, as checks on HTTP exchanges.

``tests/contracts/fixtures/ray_serve-5eee9ed.json`` (``scripts/refresh_contracts.py --only ray-serve``) holds the
reply models' schemas and the routes; the ``/generate`` body's schema is the framework fixture's
sample schema of the same commit (package data, ``protocol.framework.sample_overrides_schema``), which the ray
fixture names. :class:`Recorder` wraps any httpx
transport and checks every exchange against them as it happens.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import jsonschema

from cosmos_helpers.protocol import framework as fw

FIXTURES = Path(__file__).resolve().parents[1] / "contracts" / "fixtures"
RAY = json.loads((FIXTURES / "ray_serve-5eee9ed.json").read_text(encoding="utf-8"))
assert RAY["sample_overrides_schema"] == {"package_data": fw.SAMPLE_SCHEMA_FILE}  # the same commit's schema
SAMPLE_SCHEMA = fw.sample_overrides_schema()
OUTPUTS_SCHEMA = RAY["schemas"]["SampleOutputs"]
ROUTES = {(r["method"], r["path"]) for r in RAY["routes"]}


def check_sample(body: dict) -> None:
    jsonschema.validate(body, SAMPLE_SCHEMA)


def check_reply(body: dict) -> None:
    jsonschema.validate(body, OUTPUTS_SCHEMA)


def check_exchange(request: httpx.Request, response: httpx.Response) -> None:
    """One exchange against the contract: a known route, a valid body, a reply of the route's model."""
    path, method = request.url.path, request.method
    if path.startswith("/outputs/"):
        assert (method, "/outputs/{path}") in ROUTES
        return
    assert (method, path) in ROUTES, (method, path)
    if path == "/generate":
        if response.status_code != 422:  # a 422 is the answer to a body that is not the sample model
            check_sample(json.loads(request.content))
        if response.status_code == 200:
            check_reply(response.json())
        elif response.status_code == RAY["unknown_model"]["status"]:
            assert "not found. Available models:" in response.json()["detail"]
        elif response.status_code == 422:  # FastAPI's validation answer
            assert all(problem["loc"][0] == "body" for problem in response.json()["detail"])
    elif path == "/models" and response.status_code == 200:
        assert all(isinstance(name, str) for name in response.json())
    elif path == "/info" and response.status_code == 200:
        assert set(RAY["info_keys"]["info"]) <= set(response.json())
        assert set(RAY["info_keys"]["environment"]) <= set(response.json()["environment"])


class Recorder(httpx.BaseTransport):
    """A transport that forwards to ``inner`` and checks (and keeps) every exchange."""

    def __init__(self, inner: httpx.BaseTransport | None = None) -> None:
        self.inner = inner or httpx.HTTPTransport()
        self.exchanges: list[tuple[httpx.Request, httpx.Response]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        response.read()
        check_exchange(request, response)
        self.exchanges.append((request, response))
        return response

    def posts(self) -> list[dict]:
        return [json.loads(r.content) for r, _ in self.exchanges if r.method == "POST"]
