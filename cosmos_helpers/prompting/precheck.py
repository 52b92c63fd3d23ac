"""Pre-check a prompt against the Cosmos blocklist before it is sent, and say when the guardrails will not run.

A blocked prompt costs a round trip (or a model load) and returns a bare "Input was blocked by Cosmos3
guardrails." :func:`precheck_request` names the words instead, with the fix, before anything is sent. It
never changes the prompt: rewording is the user's call. :func:`with_precheck` wraps any backend so that
``generate`` (and ``generate_and_save``) runs the check first and refuses (``on_flag="raise"``) or warns.

Which texts the real guardrails read (so a flagged negative prompt is a warning on some stacks, a refusal on
others) and when they are off without saying so are facts of the upstream code, listed in ``COVERAGE``.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import Any

from ..errors import GuardrailError, ValidationError
from ..prompts import compact
from ..protocol.prompting import FACTS
from .blocklist import Blocklist, BlockedWord, find_blocked

_VLLM = FACTS["vllm_omni_guardrails"]
# What each stack's text guardrail reads, and where it is off without a word, from its code.
COVERAGE: dict[str, str] = {
    "framework": "Cosmos Framework 5eee9ed checks the positive prompt only "
                 "(inference/inference.py:1759, data_batch[input_caption_key]); --no-guardrails turns it off; its "
                 "video content-safety classifier is disabled in this release (common/presets.py), so the video "
                 "check is face blur only.",
    "vllm-omni": f"vLLM-Omni {_VLLM['version']} checks the positive prompt only (pipeline_cosmos3.py:547-549). A "
                 f"server started with {_VLLM['serve_flag']}, or with --deploy-config "
                 f"{' or '.join(path.split('/')[-1] for path in _VLLM['deploy_configs_with_guardrails_off'])} "
                 "(shipped with guardrails: false), checks nothing whatever a request asks, and /v1/models does not "
                 "say so; a request's extra_params.guardrails=false skips the check for that request.",
    "diffusers": "diffusers with cosmos_guardrail's CosmosSafetyChecker checks the positive prompt; this "
                 "project's DiffusersBackend refuses to start without the package when guardrails are on.",
    "tensorrt-llm": "TensorRT-LLM VisualGen checks the negative prompt too (NVIDIA/TensorRT-LLM#17523).",
}
STANDIN_NOTE = ("this project's stand-in server (LocalServer / cosmos-helpers serve) runs no guardrails unless "
                "started with --guardrails.")


@dataclass
class PrecheckReport:
    """Flagged words per field (``prompt``, ``negative_prompt``), and notes on what the guardrails will do."""

    blocklist: Blocklist
    flagged: dict[str, list[BlockedWord]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(self.flagged.values())

    def explain(self) -> str:
        lines = [f"blocklist: {self.blocklist.source}" + ("" if self.blocklist.complete else
                 " - a sample, not the real list: passing it does not mean the guardrail passes")]
        for name, hits in self.flagged.items():
            lines += [f"{name}: {hit}" for hit in hits] or [f"{name}: no blocklisted words"]
        return "\n".join(lines + [f"note: {note}" for note in self.notes])

    def __str__(self) -> str:
        return self.explain()

    def _repr_markdown_(self) -> str:
        """A table in notebooks: field, word, blocklist entry, rule, fix; then the notes."""
        rows = [f"| {name} | `{hit.word}` | `{hit.entry}` | {hit.rule} | {hit.fix} |"
                for name, hits in self.flagged.items() for hit in hits]
        head = f"Blocklist: {self.blocklist.source}" + ("" if self.blocklist.complete else " (a sample, not the "
                                                         "real list: passing it does not mean the guardrail passes)")
        table = ["| field | word | entry | rule | fix |", "| --- | --- | --- | --- | --- |", *rows] if rows else [
            "**No blocklisted words.**"]
        return "\n".join([head, "", *table, "", *(f"* {note}" for note in self.notes)])


def framework_negative_prompt() -> dict[str, Any]:
    """The negative caption the Cosmos Framework uses by default for video (``inference/defaults/neg_prompts.json``)."""
    return json.loads(FACTS["default_negative_prompt"])


def _text(value: Any, name: str) -> str:
    if isinstance(value, dict):
        return compact(value)
    if not isinstance(value, str):
        raise ValidationError(name, f"expected text or a dict caption, got {type(value).__name__}.",
                              "pass the prompt as a str or dict.")
    return value


def resolve_blocklist(blocklist: Any = None) -> Blocklist:
    """A ``Blocklist``, a folder path, or ``None``: the Hugging Face cache's real lists, else the known subset."""
    if isinstance(blocklist, Blocklist):
        return blocklist
    if blocklist is None:
        return Blocklist.find_cached() or Blocklist.known_subset()
    if isinstance(blocklist, (list, tuple, set)):
        return Blocklist.from_words(blocklist)
    return Blocklist.from_folder(blocklist)


def precheck(prompt: Any = None, negative_prompt: Any = None, *, blocklist: Any = None) -> PrecheckReport:
    """The blocklisted words in ``prompt`` and ``negative_prompt`` (text or dict captions), and what to do."""
    report = PrecheckReport(resolve_blocklist(blocklist))
    for name, value in (("prompt", prompt), ("negative_prompt", negative_prompt)):
        if value is None:
            continue
        text = _text(value, name)
        if not text.strip():
            raise ValidationError(name, "is empty; the guardrail blocks an empty prompt.", "write a prompt.")
        report.flagged[name] = find_blocked(text, report.blocklist)
    if report.flagged.get("negative_prompt"):
        report.notes.append("a flagged negative prompt passes the framework and vLLM-Omni, which check only the "
                            f"prompt, but is refused elsewhere: {COVERAGE['tensorrt-llm']}")
    return report


def guardrail_notes(request: Any, backend: Any = None) -> list[str]:
    """When the guardrails will not run for ``request`` on ``backend``, in words (empty: nothing to say)."""
    name = getattr(backend, "name", None)
    notes = []
    if request.guardrails is False:
        notes.append("guardrails are OFF for this request (GenerationRequest(guardrails=False), or a profile that "
                     "turns them off, such as 'tiny'): no backend will check it. Pass guardrails=True to run them.")
    if name == "vllm-omni":
        notes += [COVERAGE["vllm-omni"], STANDIN_NOTE]
    elif name in COVERAGE:
        notes.append(COVERAGE[name])
    return notes


def precheck_request(request: Any, blocklist: Any = None, *, backend: Any = None) -> PrecheckReport:
    """:func:`precheck` on what ``request`` sends (the prompt with its metadata, the negative prompt, if any)."""
    report = precheck(request.prompt_text(), request.negative_prompt_text(), blocklist=blocklist)
    report.notes += guardrail_notes(request, backend)
    return report


class PrecheckedBackend:
    """``backend`` with the blocklist pre-check before every ``generate``; the prompt is sent as it is.

    ``on_flag="raise"`` refuses a flagged prompt with :class:`~cosmos_helpers.errors.GuardrailError` before
    anything is sent; ``"warn"`` warns and sends it. A flagged negative prompt warns in both modes unless
    ``strict_negative`` (the framework and vLLM-Omni do not check it; TensorRT-LLM does).
    """

    def __init__(self, backend: Any, blocklist: Any = None, *, on_flag: str = "raise",
                 strict_negative: bool = False) -> None:
        if on_flag not in ("raise", "warn"):
            raise ValidationError("on_flag", f"{on_flag!r} is not 'raise' or 'warn'.", "pass on_flag='raise'.")
        self.backend, self.on_flag, self.strict_negative = backend, on_flag, strict_negative
        self.blocklist = resolve_blocklist(blocklist)
        self.last_report: PrecheckReport | None = None

    @property
    def name(self) -> str:
        return self.backend.name  # manifests record the real backend

    def __getattr__(self, attribute: str) -> Any:
        if attribute == "backend":  # not set yet (copying, unpickling)
            raise AttributeError(attribute)
        return getattr(self.backend, attribute)

    def generate(self, request: Any, **kwargs: Any) -> Any:
        report = self.last_report = precheck_request(request, self.blocklist, backend=self.backend)
        refuse = report.flagged.get("prompt") or (self.strict_negative and report.flagged.get("negative_prompt"))
        if refuse and self.on_flag == "raise":
            raise GuardrailError(f"blocklisted words, nothing sent:\n{report.explain()}")
        if not report.ok:
            warnings.warn(f"blocklisted words (sent as written):\n{report.explain()}", stacklevel=2)
        return self.backend.generate(request, **kwargs)


def with_precheck(backend: Any, blocklist: Any = None, *, on_flag: str = "raise",
                  strict_negative: bool = False) -> PrecheckedBackend:
    """``backend`` running the blocklist pre-check before each generation (see :class:`PrecheckedBackend`)."""
    return PrecheckedBackend(backend, blocklist, on_flag=on_flag, strict_negative=strict_negative)
