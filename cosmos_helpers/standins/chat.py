"""An offline stand-in for an OpenAI-compatible chat endpoint that upsamples prompts, for notebooks and CI: vLLM's
answer and error shapes around a caption built deterministically from the last user message (:func:`answer`). Not a
language model: it shows the plumbing, never the quality of an upsampler."""

from __future__ import annotations

import hashlib
import json
import re
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from ..prompting.captions import KINDS, RESOLUTION_TABLE, TIME_RANGE, caption_schema
from .threaded import ThreadedApp

STANDIN_MODEL = "cosmos-caption-standin"
_PROSE = {"description", "temporal_caption", "comprehensive_t2i_caption", "background_setting", "context"}
_PARAMETERS = re.compile(r"Output parameters: resolution (?P<resolution>\w+), aspect_ratio (?P<aspect>\d+,\d+)"
                         r"(?:, duration (?P<duration>\w+), fps (?P<fps>\d+))?\.")


def _error(status: int, message: str, kind: str = "BadRequestError", param: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": status}}, status)


def sentence_and_parameters(text: str) -> tuple[str, dict[str, Any]]:
    """The user's sentence and stated output parameters in an upsampler instruction (or the text as it is)."""
    match = _PARAMETERS.search(text)
    if not match:
        return text.strip(), {}
    before = text[: match.start()].rstrip().split("\n\n")[-1].strip()
    values: dict[str, Any] = {}
    sizes = RESOLUTION_TABLE.get(match["resolution"], {})
    if match["aspect"] in sizes:
        values = {"resolution": dict(sizes[match["aspect"]]), "aspect_ratio": match["aspect"]}
    if match["duration"]:
        values.update(duration=match["duration"], fps=int(match["fps"]))
    return before, values


def instance(schema: dict[str, Any], sentence: str, key: str = "") -> Any:
    """A deterministic value valid under ``schema`` (the subset the caption schemas use)."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        return {name: instance(sub, sentence, name) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        return [instance(schema.get("items", {}), sentence, key)]
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if schema.get("pattern") == TIME_RANGE:
        return "0:00-0:05"
    return sentence if key in _PROSE else f"{key.replace('_', ' ')} as suits: {sentence}"


def answer(body: dict[str, Any], model: str) -> dict[str, Any]:
    """The chat-completion answer to a checked request body: an instance of its ``response_format`` JSON Schema (else
    of the template the instruction names) with the instruction's "Output parameters" copied into the metadata."""
    text = _message_text(body["messages"][-1])
    sentence, parameters = sentence_and_parameters(text)
    format_ = body.get("response_format") or {}
    schema = (format_["json_schema"]["schema"] if format_.get("type") == "json_schema"
              else caption_schema("video" if "temporal_caption" in text else "image"))
    caption = instance(schema, sentence)
    if isinstance(caption, dict):
        caption.update({k: v for k, v in parameters.items() if k in schema.get("properties", {})})
    content = json.dumps(caption)
    if format_.get("type") != "json_schema":
        content = f"```json\n{content}\n```"  # as the framework's instruction asks for
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]
    prompt_tokens, completion_tokens = len(text.split()), len(content.split())
    return {"id": f"chatcmpl-{digest}", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop", "logprobs": None}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content or "")


def _problem(body: Any, model: str) -> JSONResponse | None:
    """What vLLM would refuse in ``body``, or ``None``."""
    if not isinstance(body, dict):
        return _error(400, "the request body must be a JSON object")
    if body.get("model") != model:
        return _error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(
            isinstance(m, dict) and m.get("role") in ("system", "user", "assistant", "developer") for m in messages):
        return _error(400, "messages must be a non-empty list of {role, content} objects", param="messages")
    if messages[-1].get("role") != "user" or not _message_text(messages[-1]).strip():
        return _error(400, "the last message must be a user message with text", param="messages")
    format_ = body.get("response_format")
    if format_ is not None:
        if not isinstance(format_, dict) or format_.get("type") not in ("text", "json_object", "json_schema"):
            return _error(400, "response_format.type must be 'text', 'json_object' or 'json_schema'",
                          param="response_format")
        if format_["type"] == "json_schema" and not isinstance((format_.get("json_schema") or {}).get("schema"),
                                                                dict):
            return _error(400, "response_format.json_schema.schema must be a JSON Schema object",
                          param="response_format")
    if body.get("stream"):
        return _error(400, "this stand-in does not stream; send stream=false", param="stream")
    return None


def create_chat_app(model: str = STANDIN_MODEL) -> FastAPI:
    app = FastAPI(title="Cosmos caption upsampler stand-in",
                  description=f"Deterministic, offline; serves {model!r}. Templates: {', '.join(KINDS)}.")

    @app.get("/health")
    def health() -> dict:
        return {}

    @app.get("/v1/models")
    def models() -> dict:
        return {"object": "list", "data": [{"id": model, "object": "model", "created": 0,
                                            "owned_by": "cosmos-helpers"}]}

    @app.post("/v1/chat/completions")
    async def completions(request: Request):
        try:
            body = json.loads(await request.body())
        except ValueError:
            return _error(400, "the request body is not JSON")
        problem = _problem(body, model)
        return answer(body, model) if problem is None else problem
    return app


class ChatStandin(ThreadedApp):
    """``with ChatStandin() as s: upsample(..., endpoint=s.url, model=s.model)``: in a thread, on a free port."""

    def __init__(self, model: str = STANDIN_MODEL, *, host: str = "127.0.0.1", port: int | None = None,
                 ready_timeout: float = 30.0) -> None:
        self.model = model
        super().__init__(create_chat_app(model), host=host, port=port, ready_timeout=ready_timeout, lifespan="off",
                         name="chat-standin")

    def __repr__(self) -> str:
        return f"ChatStandin(model={self.model!r}, url={self.url!r})"
