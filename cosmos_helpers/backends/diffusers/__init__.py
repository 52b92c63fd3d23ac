"""Cosmos 3 in process through diffusers: the backend, its shared pipelines (:mod:`.loading`), the runner every call
goes through with its loops, step cache and guardrails (:mod:`.runner`)."""

from .backend import DiffusersBackend
from .runner import GUARDRAIL_HELP, guardrail_errors
from .loading import Builder, free_pipeline, pipeline_class

__all__ = ["GUARDRAIL_HELP", "Builder", "DiffusersBackend", "free_pipeline", "guardrail_errors", "pipeline_class"]
