"""Pre-check a prompt against the Cosmos blocklist before it is sent, and say when the guardrails will not run.

A blocked prompt costs a round trip (or a model load) for a bare "Input was blocked by Cosmos3 guardrails."; the
pre-check names the words and the fix first and never rewords the prompt (the user's call).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..backends.base import Backend
from ..errors import GuardrailError, ValidationError
from ..prompts import compact
from ..protocol.prompting import FACTS
from ..views.pages import markdown_table
from .blocklist import Blocklist, BlockedWord, find_blocked

_VLLM = FACTS["vllm_omni_guardrails"]
# What each stack's text guardrail reads, and where it is off without a word, from the upstream code.
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
# What to say of each backend's guardrails: its stack's coverage, and for vLLM-Omni the stand-in server's too.
COVERAGE_NOTES: dict[str, tuple[str, ...]] = {
    **{name: (note,) for name, note in COVERAGE.items()}, "vllm-omni": (COVERAGE["vllm-omni"], STANDIN_NOTE)}


@dataclass
class PrecheckReport:
    """Flagged words per field (``prompt``, ``negative_prompt``), and notes on what the guardrails will do."""

    blocklist: Blocklist
    flagged: dict[str, list[BlockedWord]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(self.flagged.values())

    @property
    def source(self) -> str:
        return self.blocklist.source + ("" if self.blocklist.complete else " (a sample, not the real list: passing "
                                        "it does not mean the guardrail passes)")

    def explain(self) -> str:
        lines = [f"blocklist: {self.source}"]
        for name, hits in self.flagged.items():
            lines += [f"{name}: {hit}" for hit in hits] or [f"{name}: no blocklisted words"]
        return "\n".join(lines + [f"note: {note}" for note in self.notes])

    __str__ = explain

    def _repr_markdown_(self) -> str:
        rows = [{"field": name, "word": f"`{hit.word}`", "entry": f"`{hit.entry}`", "rule": hit.rule, "fix": hit.fix}
                for name, hits in self.flagged.items() for hit in hits]
        table = markdown_table(rows, tuple(rows[0])) if rows else "**No blocklisted words.**"
        return "\n".join([f"Blocklist: {self.source}", "", table, "", *(f"* {note}" for note in self.notes)])


def framework_negative_prompt() -> dict[str, Any]:
    """The negative caption the Cosmos Framework uses by default for video (``inference/defaults/neg_prompts.json``)."""
    return json.loads(FACTS["default_negative_prompt"])


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
        text = compact(value) if isinstance(value, dict) else value
        if not isinstance(text, str):
            raise ValidationError(name, f"expected text or a dict caption, got {type(value).__name__}.",
                                  "pass the prompt as a str or dict.")
        if not text.strip():
            raise ValidationError(name, "is empty; the guardrail blocks an empty prompt.", "write a prompt.")
        report.flagged[name] = find_blocked(text, report.blocklist)
    if report.flagged.get("negative_prompt"):
        report.notes.append("a flagged negative prompt passes the framework and vLLM-Omni, which check only the "
                            f"prompt, but is refused elsewhere: {COVERAGE['tensorrt-llm']}")
    return report


def precheck_request(request: Any, blocklist: Any = None, *, backend: Any = None) -> PrecheckReport:
    """:func:`precheck` on what ``request`` sends (the prompt with its metadata, the negative prompt, if any), with
    notes on when the guardrails will not run for it on ``backend``."""
    request = request.resolve()
    report = precheck(request.prompt_text(), request.negative_prompt_text(), blocklist=blocklist)
    if request.guardrails is False:
        report.notes.append("guardrails are OFF for this request (GenerationRequest(guardrails=False), or a profile "
                            "that turns them off, such as 'tiny'): no backend will check it. Pass guardrails=True to "
                            "run them.")
    report.notes += COVERAGE_NOTES.get(backend.name if backend is not None else None, ())
    return report


class PrecheckedBackend(Backend):
    """``backend`` with the blocklist pre-check before every request it runs; the prompt is sent as it is.

    ``on_flag="raise"`` refuses a flagged prompt with ``GuardrailError`` before anything is sent; ``"warn"`` warns
    and sends it. A flagged negative prompt warns in both modes unless ``strict_negative`` (the framework and
    vLLM-Omni do not check it; TensorRT-LLM does). Everything else is the wrapped backend's."""

    def __init__(self, backend: Backend, blocklist: Any = None, *, on_flag: str = "raise",
                 strict_negative: bool = False) -> None:
        if on_flag not in ("raise", "warn"):
            raise ValidationError("on_flag", f"{on_flag!r} is not 'raise' or 'warn'.", "pass on_flag='raise'.")
        self.backend, self.on_flag, self.strict_negative = backend, on_flag, strict_negative
        self.blocklist = resolve_blocklist(blocklist)
        self.last_report: PrecheckReport | None = None

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.backend.name  # manifests record the real backend

    @property
    def remote(self) -> bool:  # type: ignore[override]
        return self.backend.remote

    def __repr__(self) -> str:
        return f"with_precheck({self.backend!r}, on_flag={self.on_flag!r})"

    def check(self, request: Any) -> None:
        self._precheck(request)
        self.backend.check(request)

    def generate(self, request: Any, **kwargs: Any) -> Any:
        self._precheck(request)
        return self.backend.generate(request, **kwargs)

    def generate_many(self, requests: Sequence[Any], *, names: Sequence[str] | None = None) -> list[Any]:
        for request in requests:  # every one before any is sent
            self._precheck(request)
        return self.backend.generate_many(requests, names=names)

    def _precheck(self, request: Any) -> None:
        report = self.last_report = precheck_request(request, self.blocklist, backend=self.backend)
        refuse = report.flagged.get("prompt") or (self.strict_negative and report.flagged.get("negative_prompt"))
        if refuse and self.on_flag == "raise":
            raise GuardrailError(f"blocklisted words, nothing sent:\n{report.explain()}")
        if not report.ok:
            warnings.warn(f"blocklisted words (sent as written):\n{report.explain()}", stacklevel=3)

    def output_settings(self) -> dict[str, Any]:
        return self.backend.output_settings()

    def close(self) -> None:
        self.backend.close()

    def resolve_sample(self, sample: Any, **how: Any) -> Any:
        return self.backend.resolve_sample(sample, **how)

    def check_sample(self, sample: Any, r: Any, given: set[str], step_cache: Any = None) -> None:
        self.backend.check_sample(sample, r, given, step_cache)

    def localize(self, r: Any, given: set[str], **how: Any) -> Any:
        return self.backend.localize(r, given, **how)

    def dry_run(self, run: Any, **how: Any) -> Any:
        return self.backend.dry_run(run, **how)

    def run_sample(self, run: Any, **how: Any) -> Any:
        return self.backend.run_sample(run, **how)


with_precheck = PrecheckedBackend  # ``with_precheck(backend)`` reads as what it does
