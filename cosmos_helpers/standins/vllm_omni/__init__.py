"""A local stand-in for a vLLM-Omni 0.30.0 server serving Cosmos3, backed by the Diffusers backend.

It lets the vLLM-Omni cookbook and the HTTP client run anywhere, offline: ``LocalServer`` starts
``cosmos-helpers serve`` as a subprocess; ``create_app`` builds the FastAPI app to embed or test. Routes, fields,
defaults, validation, answers and errors follow vLLM-Omni 0.30.0 (facts in ``cosmos_helpers.protocol.vllm_omni``,
held to the real package by ``tests/contracts``). Every request becomes a ``GenerationRequest`` carrying the values
vLLM-Omni would use, for the served model; the stand-in is never the reference.

Where it differs from vLLM-Omni 0.30.0 (the README lists these too):

* Accepted but not reproduced on diffusers: ``extra_params.negative_metadata_mode`` (upstream default
  ``inverse``: metadata sentences added to the negative prompt), ``system_prompt`` (a custom system prompt),
  ``max_sequence_length`` (prompt truncation, 4096), ``aspect_ratio``, ``sound_duration``/``audio_duration`` (the
  soundtrack lasts the video), ``lora`` (per-request adapters), the encoder keys ``video_codec_options``,
  ``preencode_mp4``, ``preencode_batch_frames`` (the MP4 is always H.264 ``ultrafast``, crf 18), ``quality``,
  ``output_compression`` for PNG (a zlib level upstream), and the precision of ``return_stage_metrics`` (stage
  timings as diffusers reports them; ``peak_memory_mb`` is 0 on CPU).
* A JSON caption gets its metadata from ``GenerationRequest.prompt_text()``: ``aspect_ratio`` is always injected,
  by the framework's rule; upstream injects it only when the request or the caption has one.
* Answered 400 before any work where vLLM-Omni fails with a 500 from inside its pipeline: bad ``extra_params``
  values (hint fields, ``control_weight``, presets, ``negative_metadata_mode``, ``condition_*``, transfer options
  without a hint), malformed action keys, image and video references together, ``true`` for a depth/seg/wsm hint
  without an uploaded control.
* Action requests (``extra_params.action_mode``: forward_dynamics, inverse_dynamics, policy) run on the tiny
  model's action heads, as asynchronous jobs or sync, with the job record's ``action`` as vLLM-Omni fills it
  (``server/action_task.py``). Not served: RoboLab observations (``robot_obs``/``observation``), a bare
  ``domain_id`` (a ``domain_name`` is needed), ``num_frames == action_chunk_size`` (the stand-in makes
  ``chunk + 1`` frames), and a ``size`` larger than the 720 action canvas.
* Refused with 400 where the tiny model or ``GenerationRequest`` cannot follow: sizes that are not multiples of
  16, fps above 120, negative seeds, and image2video / video2video with fewer than 5 frames (including the
  1-frame default when ``num_frames`` and ``seconds`` are omitted; a 1-frame text2video works and returns a
  1-frame MP4).
* ``n`` > 1 images use seeds ``seed, seed+1, ...`` (upstream: one generator for the batch).
* Step caching (``--cache-backend`` / ``--cache-config``, :mod:`.cache`): ``none`` or ``sea_cache`` only, run by
  diffusers' hooks (residual order 0 or 1); unknown config keys are refused at start (vLLM-Omni ignores them).
* Guardrails are off unless the server is started with them (``guardrails=True`` / ``--guardrails``); upstream
  turns them on by default and will not start without the ``cosmos_guardrail`` package.
* Hardening the real server does not have: a bounded queue (429 + ``Retry-After``; ``--max-queue 0`` queues
  without bound like vLLM-Omni), limits on body, field, media, prompt and output sizes, job expiry, server-local
  paths (``control_path``, ``file://``) only under ``--allowed-local-media-path`` (upstream opens them
  unchecked), remote URLs fetched only with ``--allow-url-fetch``, and a text field over its cap answered by
  Starlette's 400 (upstream: the same, at its fixed 1 MiB).

Nothing heavy is imported here.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["LocalServer", "ThreadedServer", "create_app"]
_HOMES = {"LocalServer": ".local", "ThreadedServer": ".local", "create_app": ".app"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'cosmos_helpers.standins.vllm_omni' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name], __name__), name)
