"""Prompts that pass: structured Cosmos3 captions checked against the framework's own templates (``captions``),
sentences upsampled into them through any OpenAI-compatible chat endpoint (``upsample``), and the blocklist
guardrail's words found before a request is sent (``precheck``, ``blocklist``)."""

from __future__ import annotations

from .blocklist import Blocklist, BlockedWord, find_blocked
from .captions import (CaptionCheck, CaptionProblem, blank_caption, build_caption, caption_schema, check_caption,
                       save_caption)
from .precheck import (PrecheckedBackend, PrecheckReport, framework_negative_prompt, precheck, precheck_request,
                       with_precheck)
from .upsample import Upsampler, UpsampleError, chat_request, upsample_prompt

__all__ = ["Blocklist", "BlockedWord", "find_blocked", "CaptionCheck", "CaptionProblem", "blank_caption",
           "build_caption", "save_caption", "check_caption", "PrecheckedBackend", "PrecheckReport", "precheck",
           "precheck_request", "framework_negative_prompt", "with_precheck", "caption_schema", "Upsampler",
           "UpsampleError", "chat_request", "upsample_prompt"]
