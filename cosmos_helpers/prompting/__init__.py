"""Prompts that pass: structured Cosmos3 captions built and checked against the framework's own templates,
sentences upsampled into them through any OpenAI-compatible chat endpoint, and the blocklist guardrail's
words found before a request is sent.

* :func:`build_caption` / :func:`check_caption` / :func:`caption_schema` / :func:`blank_caption` (``captions``,
  ``schema``);
* :func:`upsample_prompt` / :class:`Upsampler` (``upsample``); an offline endpoint to try it on is
  :class:`cosmos_helpers.standins.chat.ChatStandin`;
* :func:`precheck` / :func:`precheck_request` / :func:`with_precheck` / :class:`Blocklist` (``precheck``,
  ``blocklist``).
"""

from __future__ import annotations

from .blocklist import Blocklist, BlockedWord, find_blocked
from .captions import (CaptionCheck, CaptionProblem, blank_caption, build_caption, check_caption,
                       save_caption)
from .precheck import (PrecheckedBackend, PrecheckReport, framework_negative_prompt, precheck, precheck_request,
                       with_precheck)
from .schema import caption_schema
from .upsample import Upsampler, UpsampleError, chat_request, upsample_prompt

__all__ = ["Blocklist", "BlockedWord", "find_blocked", "CaptionCheck", "CaptionProblem", "blank_caption",
           "build_caption", "save_caption", "check_caption", "PrecheckedBackend", "PrecheckReport", "precheck",
           "precheck_request", "framework_negative_prompt", "with_precheck", "caption_schema", "Upsampler",
           "UpsampleError", "chat_request", "upsample_prompt"]
