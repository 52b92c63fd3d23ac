"""Cosmos 3 in process through diffusers: the backend (:mod:`.backend`), how pipelines are loaded and shared
(:mod:`.loading`), the one runner every call goes through (:mod:`.runner`), the three loops (:mod:`.loops`: the
pipeline's own call, the distilled blocks, the edit loop), their call arguments (:mod:`.arguments`,
:mod:`.edit`, :mod:`.distilled`), step caching (:mod:`.cache`) and the guardrails (:mod:`.runner`)."""

from .backend import DiffusersBackend
from .runner import GUARDRAIL_HELP, guardrail_errors
from .loading import Builder, free_pipeline, pipeline_class

__all__ = ["GUARDRAIL_HELP", "Builder", "DiffusersBackend", "free_pipeline", "guardrail_errors", "pipeline_class"]
