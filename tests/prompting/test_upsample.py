"""Prompt upsampling: the request, the answer handling, the retry policy, and the offline stand-in endpoint."""

from __future__ import annotations

import json

import httpx
import pytest

from cosmos_helpers.errors import ConnectionLostError, ServerError, ValidationError
from cosmos_helpers.prompting import UpsampleError, Upsampler, chat_request, check_caption, upsample_prompt
from cosmos_helpers.standins.chat import STANDIN_MODEL, ChatStandin, answer, instance
from cosmos_helpers.prompting.captions import caption_schema

SENTENCE = "A robot arm sorts parcels on a conveyor belt."


@pytest.fixture(scope="module")
def standin():
    with ChatStandin() as server:
        yield server


def _transport(answers: list, seen: list) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        status, body = answers.pop(0)
        return httpx.Response(status, json=body)

    return httpx.MockTransport(handle)


def _completion(content) -> dict:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}


def test_request_follows_the_openai_chat_types():
    from openai.types.chat import completion_create_params
    from pydantic import TypeAdapter

    params = completion_create_params.CompletionCreateParamsNonStreaming
    for kind in ("image", "video"):
        body = chat_request(SENTENCE, model="m", kind=kind, temperature=0.2, seed=3)
        TypeAdapter(params).validate_python(body)
        assert set(body) <= set(params.__annotations__) | set(completion_create_params.CompletionCreateParamsBase
                                                               .__annotations__)
        assert body["response_format"]["json_schema"]["schema"] == caption_schema(kind)
    assert "response_format" not in chat_request(SENTENCE, model="m", constrained=False)


@pytest.mark.parametrize("options, field", [
    ({"sentence": "  "}, "sentence"), ({"sentence": 3}, "sentence"), ({"kind": "movie"}, "kind"),
    ({"model": ""}, "model"), ({"resolution": "1080"}, "resolution"), ({"aspect_ratio": "2,1"}, "aspect_ratio"),
    ({"duration": "12s"}, "duration"), ({"fps": 25}, "fps"), ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": True}, "max_tokens"),
])
def test_bad_request_values_are_refused_before_sending(options, field):
    arguments = {"sentence": SENTENCE, "model": "m", **options}
    with pytest.raises(ValidationError) as info:
        chat_request(arguments.pop("sentence"), **arguments)
    assert info.value.field == field and info.value.fix


@pytest.mark.parametrize("endpoint, field", [("ftp://host", "endpoint"), ("", "endpoint"), (None, "endpoint")])
def test_bad_endpoints_are_refused(endpoint, field):
    with pytest.raises(ValidationError) as info:
        Upsampler(endpoint)
    assert info.value.field == field


def test_bad_timeout_and_retries_are_refused():
    with pytest.raises(ValidationError, match="timeout"):
        Upsampler("http://h", timeout=0)
    with pytest.raises(ValidationError, match="retries"):
        Upsampler("http://h", retries=0)


@pytest.mark.parametrize("url", ["http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/chat/completions"])
def test_endpoint_forms_reach_the_same_route(url):
    seen: list = []
    caption = Upsampler(url, model="m", transport=_transport(
        [(200, answer(chat_request(SENTENCE, model="m"), "m"))], seen)).caption(SENTENCE)
    assert str(seen[0].url) == "http://h:1/v1/chat/completions"
    assert check_caption(caption, "video", require_metadata=True).ok


def test_busy_server_is_retried_then_answers_and_a_400_is_not():
    seen: list = []
    ok = answer(chat_request(SENTENCE, model="m"), "m")
    client = Upsampler("http://h", model="m", retries=2, transport=_transport([(503, {}), (200, ok)], seen))
    client.retry.base = 0.0
    assert client.caption(SENTENCE)["fps"] == 24 and len(seen) == 2
    seen.clear()
    bad = {"error": {"message": "bad schema", "type": "BadRequestError", "code": 400}}
    client = Upsampler("http://h", model="m", retries=3, transport=_transport([(400, bad)], seen))
    with pytest.raises(ServerError, match="bad schema"):
        client.caption(SENTENCE)
    assert len(seen) == 1


def test_a_refused_connection_says_so():
    with pytest.raises(ConnectionLostError, match="is the server up"):
        upsample_prompt(SENTENCE, endpoint="http://127.0.0.1:9", model="m", retries=1, timeout=2)


@pytest.mark.parametrize("reply, words", [
    ({"nothing": 1}, "not a chat completion"),
    (_completion("Sure! Here is a caption."), "not a JSON object"),
    (_completion("[1, 2]"), "JSON list, not an object"),
    (_completion(json.dumps({"subjects": []})), "background_setting: missing"),
])
def test_unusable_answers_are_explained(reply, words):
    with pytest.raises(UpsampleError, match=words):
        Upsampler("http://h", model="m", transport=_transport([(200, reply)], [])).caption(SENTENCE)


def test_fenced_and_content_part_answers_are_read_and_metadata_is_pinned():
    body = chat_request(SENTENCE, model="m", kind="image", constrained=False)
    fenced = answer(body, "m")
    assert fenced["choices"][0]["message"]["content"].startswith("```json")
    parts = _completion([{"type": "text", "text": fenced["choices"][0]["message"]["content"]}])
    for reply in (fenced, parts):
        caption = Upsampler("http://h", model="m", transport=_transport([(200, reply)], [])).caption(
            SENTENCE, kind="image", resolution="720", aspect_ratio="9,16", constrained=False)
        assert caption["resolution"] == {"H": 1280, "W": 720} and caption["aspect_ratio"] == "9,16"


def test_standin_end_to_end_is_deterministic_and_schema_valid(standin):
    first = upsample_prompt(SENTENCE, endpoint=standin.url, kind="video", duration="8s", fps=30)  # model: the only one
    again = upsample_prompt(SENTENCE, endpoint=standin.url + "/v1", model=STANDIN_MODEL, kind="video", duration="8s",
                            fps=30)
    assert first == again and first["temporal_caption"] == SENTENCE
    assert (first["duration"], first["fps"], first["resolution"]) == ("8s", 30, {"H": 480, "W": 832})
    assert check_caption(first, "video", require_metadata=True).ok


def test_standin_answers_like_openai(standin):
    from openai import BadRequestError, NotFoundError, OpenAI
    from openai.types.chat import ChatCompletion

    client = OpenAI(base_url=standin.url + "/v1", api_key="unused", max_retries=0)
    completion = client.chat.completions.create(**chat_request(SENTENCE, model=STANDIN_MODEL, kind="image"))
    assert isinstance(completion, ChatCompletion) and completion.choices[0].finish_reason == "stop"
    assert check_caption(json.loads(completion.choices[0].message.content), "image").ok
    assert [m.id for m in client.models.list()] == [STANDIN_MODEL]
    with pytest.raises(NotFoundError):
        client.chat.completions.create(model="other", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(BadRequestError):
        client.chat.completions.create(model=STANDIN_MODEL, messages=[{"role": "system", "content": "hi"}])
    with pytest.raises(BadRequestError):
        client.chat.completions.create(model=STANDIN_MODEL, messages=[{"role": "user", "content": "hi"}],
                                       response_format={"type": "json_schema", "json_schema": {"name": "x"}})


def test_standin_bad_bodies(standin):
    for body in (b"not json", b"[1]", json.dumps({"model": STANDIN_MODEL, "messages": []}).encode(),
                 json.dumps({"model": STANDIN_MODEL, "stream": True,
                             "messages": [{"role": "user", "content": "x"}]}).encode()):
        response = httpx.post(standin.url + "/v1/chat/completions", content=body)
        assert response.status_code == 400 and response.json()["error"]["message"]


def test_instance_of_schema_is_valid_for_both_kinds():
    import jsonschema

    for kind in ("image", "video"):
        jsonschema.validate(instance(caption_schema(kind), SENTENCE), caption_schema(kind))


def test_bad_input_fails_before_the_model_list_is_asked():
    seen: list = []
    client = Upsampler("http://h", transport=_transport([], seen))  # model=None: it would ask /v1/models
    with pytest.raises(ValidationError, match="fps"):
        client.caption(SENTENCE, fps=25)
    with pytest.raises(TypeError):
        client.caption(SENTENCE, colour="red")  # an unknown option is Python's error, before sending
    assert seen == []


def test_model_discovery_needs_exactly_one_model():
    listing = {"object": "list", "data": [{"id": "a"}, {"id": "b"}]}
    client = Upsampler("http://h", transport=_transport([(200, listing)], []))
    with pytest.raises(ValidationError, match="which one is the upsampler"):
        client.caption(SENTENCE)
