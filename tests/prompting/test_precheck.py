"""The guardrail pre-check: reports, notes on guardrails that will not run, and the backend wrapper."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from cosmos_helpers import GenerationRequest, generate_and_save, generate_and_save_all
from cosmos_helpers.backends.base import Backend
from cosmos_helpers.errors import GuardrailError, ValidationError
from cosmos_helpers.prompting import Blocklist, precheck, precheck_request, with_precheck
from cosmos_helpers.result import Generation

WORDS = Blocklist.from_words(["bleeding", "lifeless"])


class RecordingBackend(Backend):
    """Records what reaches it; returns a one-pixel image."""

    name = "diffusers"

    def __init__(self) -> None:
        self.requests: list = []

    def generate(self, request, **kwargs):
        request = request.resolve()
        self.check(request)
        self.requests.append(request)
        return Generation(frames=np.zeros((1, 16, 16, 3), np.uint8), fps=1.0, seed=request.seed, request=request,
                          backend=self.name, model=request.model)


def _request(prompt="A robot sorts parcels.", negative=None, **options):
    return GenerationRequest(mode="text2image", prompt=prompt, negative_prompt=negative, profile="tiny", **options)


def test_report_names_words_per_field_and_the_negative_prompt_coverage():
    report = precheck("a lifeless street", {"look": "color bleeding"}, blocklist=WORDS)
    assert not report.ok
    assert [h.entry for h in report.flagged["prompt"]] == ["lifeless"]
    assert [h.entry for h in report.flagged["negative_prompt"]] == ["bleeding"]
    assert "check only the prompt" in report.explain() and "TensorRT-LLM" in report.explain()
    assert "a sample, not the real list" in report.explain()
    assert precheck("a calm street", blocklist=WORDS).ok


def test_default_list_is_the_cache_else_the_known_subset(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    assert "known subset" in precheck("x").blocklist.source


@pytest.mark.parametrize("prompt, field", [("   ", "prompt"), (3, "prompt")])
def test_bad_prompts_are_refused(prompt, field):
    with pytest.raises(ValidationError) as info:
        precheck(prompt, blocklist=WORDS)
    assert info.value.field == field


def test_request_notes_say_when_guardrails_are_off():
    report = precheck_request(_request(), WORDS, backend=RecordingBackend())
    assert report.ok and any("guardrails are OFF" in note for note in report.notes)
    assert any("Cosmos Framework" not in n and "diffusers" in n for n in report.notes)

    class Vllm:
        name = "vllm-omni"

    notes = precheck_request(_request(guardrails=True), WORDS, backend=Vllm()).notes
    assert not any("OFF" in n for n in notes) and any("--no-guardrails" in n for n in notes)
    assert any("stand-in server" in n for n in notes)


def test_wrapper_refuses_before_sending_and_never_changes_the_prompt(tmp_path):
    backend = RecordingBackend()
    checked = with_precheck(backend, WORDS)
    with pytest.raises(GuardrailError, match="nothing sent"):
        checked.generate(_request("a lifeless street"))
    assert backend.requests == []
    request = _request("a calm street", negative="color bleeding")
    with pytest.warns(UserWarning, match="sent as written"):
        generation = generate_and_save(checked, request, tmp_path / "out")
    assert backend.requests == [request.resolve()] and backend.requests[0].negative_prompt_text() == "color bleeding"
    assert generation.backend == "diffusers" and checked.last_report.flagged["negative_prompt"]


def test_wrapper_warn_mode_and_strict_negative():
    backend = RecordingBackend()
    with pytest.warns(UserWarning, match="lifeless"):
        with_precheck(backend, WORDS, on_flag="warn").generate(_request("a lifeless street"))
    assert len(backend.requests) == 1
    with pytest.raises(GuardrailError):
        with_precheck(backend, WORDS, strict_negative=True).generate(_request("ok", negative="bleeding"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with_precheck(backend, WORDS).generate(_request("a calm street"))
    with pytest.raises(ValidationError, match="on_flag"):
        with_precheck(backend, WORDS, on_flag="ignore")


def test_several_requests_are_each_prechecked_before_any_is_sent(tmp_path):
    """``generate_and_save_all`` hands several requests to the backend's ``generate_many`` at once: the wrapper
    checks every one of them first (it once passed them to the wrapped backend unchecked)."""
    backend = RecordingBackend()
    checked = with_precheck(backend, WORDS)
    jobs = {tmp_path / "calm": _request("a calm street"), tmp_path / "flagged": _request("a lifeless street")}
    with pytest.raises(GuardrailError, match="nothing sent"):
        generate_and_save_all(checked, jobs)
    with pytest.raises(GuardrailError, match="nothing sent"):
        checked.generate_many(list(jobs.values()))
    with pytest.raises(GuardrailError, match="nothing sent"):
        checked.check(jobs[tmp_path / "flagged"])  # what long_video asks before its first chunk
    assert backend.requests == [] and not list(tmp_path.iterdir())
    made = generate_and_save_all(checked, {tmp_path / "a": _request("a calm street"),
                                           tmp_path / "b": _request("a quiet road", seed=2)})
    assert len(backend.requests) == 2 and all(g.backend == "diffusers" for g in made.values())
