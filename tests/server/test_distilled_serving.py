"""The stand-in serving a distilled checkpoint as vLLM-Omni 0.30.0 does (the expected behaviour comes from the
variants fixture, read from the real wheel), and the tiny distilled model end to end through server and client."""

from __future__ import annotations

import httpx

from cosmos_helpers import DiffusersBackend, GenerationRequest, VllmOmniBackend
from cosmos_helpers.protocol import variants

from ..contracts.conftest import load
from .conftest import assert_envelope, instant_server, multipart
from .doubles import InstantBackend

FACTS = load("variants")["vllm_omni"]


def test_steps_guidance_shift_and_negative_prompt_are_the_checkpoints(tmp_path):
    assert "overridden to 1.0" in FACTS["_resolve_guidance_scale"][0]
    backend = InstantBackend()
    with instant_server(tmp_path, backend, model="tiny-distilled") as server:
        body = {"prompt": "a cube", "size": "32x32", "num_inference_steps": 20, "guidance_scale": 4.0,
                "flow_shift": 5.0, "negative_prompt": "blurry", "seed": 1}
        response = httpx.post(server.url + "/v1/images/generations", json=body, timeout=60)
        assert response.status_code == 200, response.text
        request = backend.last
        assert (request.profile, request.num_inference_steps, request.guidance_scale, request.flow_shift) == (
            "tiny-distilled", len(variants.DISTILLED_T_LIST), 1.0, 1.0)
        assert request.negative_prompt_text() is None


def test_text2video_and_sound_get_the_pipelines_refusal(tmp_path):
    (prefix,) = {m.replace("{}", "") for m in FACTS["_distilled_unsupported_error"] if m.endswith("{}")}
    refusals = FACTS["_validate_distilled_generation_mode"]
    with instant_server(tmp_path, InstantBackend(), model="tiny-distilled") as server:
        fields = {"prompt": "a cube", "size": "32x32", "num_frames": "5", "seed": "1"}
        response = httpx.post(server.url + "/v1/videos/sync", files=multipart(fields), timeout=60)
        assert "text-to-video requests are unsupported." in refusals
        assert_envelope(response, 400, prefix + "text-to-video requests are unsupported.")


def test_the_tiny_distilled_model_through_the_stand_in_server_and_the_client(tmp_path):
    from cosmos_helpers.standins.vllm_omni.local import ThreadedServer

    with ThreadedServer(DiffusersBackend(progress=False), storage_dir=tmp_path, model="tiny-distilled",
                        guardrails=False) as server, VllmOmniBackend(server.url) as client:
        request = GenerationRequest(mode="t2i", prompt="a red cube", profile="tiny-distilled", seed=2)
        generation = client.generate(request)
        assert generation.frames.shape == (1, 128, 128, 3)
        assert generation.provenance["served_model"] == "tiny-distilled"


def test_the_client_refuses_a_base_request_for_a_distilled_server(tmp_path):
    from cosmos_helpers.errors import ValidationError

    backend = InstantBackend()
    with instant_server(tmp_path, backend, model="tiny-distilled") as server, VllmOmniBackend(server.url) as client:
        request = GenerationRequest(mode="t2i", prompt="p", profile="tiny", model="tiny-distilled")
        try:
            client.generate(request)
        except ValidationError as error:
            assert error.field == "profile" and "tiny-distilled" in error.fix
        else:
            raise AssertionError("a base request reached a distilled server")
        assert backend.calls == 0
