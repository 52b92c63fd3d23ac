"""Prompt upsampling: a plain sentence becomes a structured Cosmos3 caption through any OpenAI-compatible chat
endpoint (vLLM, a hosted API, or the offline stand-in :mod:`cosmos_helpers.standins.chat`).

The request is the framework upsampler's (``cosmos_framework/inference/prompt_upsampling.py``) plus the caption
template's JSON Schema as ``response_format`` (vLLM structured outputs, OpenAI). Like the framework, the generation
metadata is then pinned to the values asked for; unlike it, the caption must pass ``check_caption``.
"""

from __future__ import annotations

import json
import re
import time
from contextlib import AbstractContextManager
from string import Template
from typing import Any, Mapping

import httpx

from ..backends.vllm_wire import Call, RetryPolicy, error_from_response
from ..errors import ConnectionLostError, CosmosHelpersError, ValidationError
from ..protocol.prompting import FACTS
from .captions import (KINDS, PROMPTS, RESOLUTION_TABLE, RESOLUTION_TABLE_TEXT, caption_schema, check_caption,
                       check_kind)

CHAT_COMPLETIONS, MODELS = "/v1/chat/completions", "/v1/models"
_UPSAMPLER = FACTS["upsampler"]
SYSTEM_MESSAGE: dict[str, Any] = _UPSAMPLER["system_message"]
_FENCED = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.S)  # the framework's extract_json_object rule


class UpsampleError(CosmosHelpersError):
    """The endpoint answered, but not with a usable caption (no JSON object, or one that breaks the template)."""


class ChatRetryPolicy(RetryPolicy):
    """The vLLM client's retry policy, with chat completions retried too: a completion has no side effect."""

    STATUSES = {**RetryPolicy.STATUSES, "POST": (429, 502, 503)}


def chat_base_url(endpoint: Any) -> str:
    """The server root from a root, a ``/v1`` base or a full ``/v1/chat/completions`` URL (as the framework's
    ``_normalize_openai_base_url`` accepts them)."""
    text = str(endpoint or "").strip().rstrip("/")
    if not text.startswith(("http://", "https://")):
        raise ValidationError("endpoint", f"{endpoint!r} is not an http(s) URL.",
                              "pass the server's URL, e.g. 'http://127.0.0.1:8000' (vLLM: `vllm serve MODEL`).")
    for tail in ("/chat/completions", "/v1"):
        text = text[: -len(tail)] if text.endswith(tail) else text
    return text


def output_parameters(kind: str, resolution: str, aspect_ratio: str, duration: str | None,
                      fps: int | None) -> dict[str, Any]:
    """The generation metadata a ``kind`` caption is pinned to, checked against the framework's tables."""
    if str(resolution) not in RESOLUTION_TABLE:
        raise ValidationError("resolution", f"{resolution!r} is not one of the framework's upsampler tiers.",
                              f"use one of {', '.join(map(repr, RESOLUTION_TABLE))}.")
    sizes = RESOLUTION_TABLE[str(resolution)]
    if aspect_ratio not in sizes:
        raise ValidationError("aspect_ratio", f"{aspect_ratio!r} is not one of the framework's aspect ratios.",
                              f"use one of {', '.join(map(repr, sizes))}.")
    values: dict[str, Any] = {"resolution": dict(sizes[aspect_ratio]), "aspect_ratio": aspect_ratio}
    if kind == "video":
        schema = caption_schema("video")["properties"]
        for name, value in (("duration", duration), ("fps", fps)):
            allowed = schema[name]["enum"]
            if value not in allowed:
                raise ValidationError(name, f"{value!r} is not allowed in a video caption.",
                                      f"use one of {', '.join(map(repr, allowed))}.")
            values[name] = value
    return values


def user_text(sentence: str, kind: str, *, resolution: str, aspect_ratio: str, duration: str | None = None,
              fps: int | None = None) -> str:
    """The framework's upsampler instruction for ``kind`` with ``sentence`` in it (``build_t2i/t2v_prompt_text``;
    the description is its ``build_nl_description``: the sentence, a blank line, the parameters)."""
    params = [f"resolution {resolution}", f"aspect_ratio {aspect_ratio}"]
    if kind == "video":
        params += [f"duration {duration}", f"fps {fps}"]
    description = f"{sentence.strip()}\n\nOutput parameters: {', '.join(params)}."
    values = {"json_template": FACTS["templates"][KINDS[kind]], "nl_description": description,
              "resolution_ratio_dict": RESOLUTION_TABLE_TEXT,
              "intro": _UPSAMPLER["i2v_intro"][0], "image_note": _UPSAMPLER["i2v_image_note"][0]}
    return Template(FACTS["templates"][PROMPTS[kind]]).substitute(values)


def chat_request(sentence: str, *, model: str, kind: str = "video", resolution: str = "480",
                 aspect_ratio: str = "16,9", duration: str | None = "5s", fps: int | None = 24,
                 max_tokens: int = 8192, temperature: float | None = None, seed: int | None = None,
                 constrained: bool = True) -> dict[str, Any]:
    """The checked ``/v1/chat/completions`` body that upsamples ``sentence`` (nothing is sent)."""
    if not isinstance(sentence, str) or not sentence.strip():
        raise ValidationError("sentence", "expected a non-empty sentence.",
                              "pass a sentence, e.g. 'A robot arm sorts parcels in a warehouse.'")
    kind = check_kind(kind)
    if not isinstance(model, str) or not model:
        raise ValidationError("model", f"expected the served model's name, got {model!r}.",
                              "pass model='...' as the server lists it under /v1/models.")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValidationError("max_tokens", f"expected a positive whole number, got {max_tokens!r}.",
                              "pass e.g. max_tokens=8192 (the framework's default).")
    output_parameters(kind, resolution, aspect_ratio, duration, fps)
    text = user_text(sentence, kind, resolution=resolution, aspect_ratio=aspect_ratio, duration=duration, fps=fps)
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": [
        SYSTEM_MESSAGE, {"role": "user", "content": [{"type": "text", "text": text}]}]}
    if constrained:
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": f"cosmos3_{kind}_caption", "schema": caption_schema(kind)}}
    if temperature is not None:
        body["temperature"] = float(temperature)
    if seed is not None:
        body["seed"] = int(seed)
    return body


def caption_from_answer(answer: Mapping[str, Any], kind: str, pinned: Mapping[str, Any]) -> dict[str, Any]:
    """The checked caption in a chat-completion answer, with the generation metadata pinned as asked."""
    try:
        content = answer["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise UpsampleError(f"the answer is not a chat completion (no choices[0].message.content): "
                            f"{json.dumps(answer)[:300]}") from None
    if isinstance(content, list):  # content parts
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    text = str(content or "").strip()
    fenced = _FENCED.search(text)
    try:
        caption = json.loads(fenced.group(1) if fenced else text)
    except json.JSONDecodeError as exc:
        raise UpsampleError(f"the model's answer is not a JSON object ({exc.msg}): {text[:200]!r}. Use a model "
                            "that follows instructions, or a server with structured outputs (vLLM).") from None
    if not isinstance(caption, dict):
        raise UpsampleError(f"the model answered a JSON {type(caption).__name__}, not an object.")
    caption.update(pinned)
    check = check_caption(caption, kind, require_metadata=True)
    if not check.ok:
        raise UpsampleError(f"the model's caption does not follow the framework's template.\n{check.explain()}\n"
                            "Fix: send constrained=True to a server with structured outputs, or use a stronger model.")
    return caption


class Upsampler(AbstractContextManager):
    """An OpenAI-compatible chat endpoint as the framework's prompt upsampler: ``Upsampler(url, model=...).caption(
    "A robot arm sorts parcels.")``; ``model=None`` takes the endpoint's only served model. ``timeout`` is per call,
    ``retries`` counts attempts under :class:`ChatRetryPolicy`, ``api_key`` is sent as a Bearer token."""

    def __init__(self, endpoint: str, *, model: str | None = None, api_key: str | None = None,
                 timeout: float = 300.0, connect_timeout: float = 5.0, retries: int = 2,
                 transport: Any = None) -> None:
        self.url = chat_base_url(endpoint)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValidationError("timeout", f"expected a positive number of seconds, got {timeout!r}.",
                                  "pass e.g. timeout=300 (the framework's default).")
        self.model, self.api_key = model, api_key
        self.retry = ChatRetryPolicy(retries)
        self.timeout = httpx.Timeout(float(timeout), connect=connect_timeout)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(base_url=self.url, headers=headers, transport=transport)

    def close(self) -> None:
        self.client.close()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _send(self, call: Call) -> Any:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self.client.request(call.method, call.path, json=call.json, timeout=call.timeout)
                wait = self.retry.after_status(call, attempt, response.status_code, response.headers)
                if wait is None:
                    if response.status_code >= 400:
                        raise error_from_response(response.status_code, response.content, response.headers)
                    return response.json()
            except httpx.TransportError as exc:
                wait = self.retry.after_error(call, attempt)
                if wait is None:
                    raise ConnectionLostError(f"{call.what} at {self.url} failed: {exc} (is the server up? "
                                              "check the endpoint URL)") from exc
            time.sleep(wait)

    def served_model(self) -> str:
        """The model to ask: the one given, else the endpoint's only one (``GET /v1/models``)."""
        if self.model:
            return self.model
        listed = self._send(Call("GET", MODELS, "model list", self.timeout))
        names = [item.get("id") for item in listed.get("data", []) if isinstance(item, dict)]
        if len(names) != 1:
            raise ValidationError("model", f"{self.url} serves {names or 'no models'}; which one is the upsampler?",
                                  "pass model='...'.")
        self.model = names[0]
        return self.model

    def caption(self, sentence: str, *, kind: str = "video", resolution: str = "480", aspect_ratio: str = "16,9",
                duration: str | None = "5s", fps: int | None = 24, **options: Any) -> dict[str, Any]:
        """``sentence`` as a checked ``kind`` caption; ``options``: ``max_tokens``, ``temperature``, ``seed``,
        ``constrained`` (send the JSON Schema as ``response_format``; default on)."""
        settings = dict(kind=kind, resolution=resolution, aspect_ratio=aspect_ratio, duration=duration, fps=fps,
                        **options)
        chat_request(sentence, model=self.model or "unknown", **settings)  # bad input fails before any call
        body = chat_request(sentence, model=self.served_model(), **settings)
        pinned = output_parameters(kind, resolution, aspect_ratio, duration, fps)
        answer = self._send(Call("POST", CHAT_COMPLETIONS, "prompt upsampling", self.timeout, json=body))
        return caption_from_answer(answer, kind, pinned)


def upsample_prompt(sentence: str, *, endpoint: str, model: str | None = None, kind: str = "video", **options: Any
                    ) -> dict[str, Any]:
    """One sentence to one checked caption; see :class:`Upsampler` (``api_key``, ``timeout``, ``retries``) and
    :meth:`Upsampler.caption` (``resolution``, ``aspect_ratio``, ``duration``, ``fps``, ``temperature`` ...)."""
    client_options = {key: options.pop(key) for key in ("api_key", "timeout", "retries", "transport")
                      if key in options}
    with Upsampler(endpoint, model=model, **client_options) as upsampler:
        return upsampler.caption(sentence, kind=kind, **options)
