"""The Cosmos guardrails in process: the prompt checked before a call, the frames after it."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import BackendUnavailableError, GuardrailError

GUARDRAIL_HELP = (
    "Guardrails were requested but `cosmos_guardrail` is not usable here. To run them: "
    "`pip install cosmos_guardrail` on a GPU host that can download nvidia/Cosmos-1.0-Guardrail and "
    "Qwen/Qwen3Guard-Gen-0.6B (it pulls a CUDA torch; never install it into a CPU environment). "
    "To go without: pass guardrails=False in the request (profile 'tiny' does by default)."
)


class Guardrails:
    """One backend's checker: ``cosmos_guardrail.CosmosSafetyChecker`` (loaded on first use) or the caller's own
    (an object with ``check_text_safety(str) -> bool`` and ``check_video_safety(frames) -> frames | None``)."""

    def __init__(self, checker: Any = None) -> None:
        self.checker = checker

    def get(self, wanted: bool = True):
        """The checker, or ``None`` when ``wanted`` is off."""
        if not wanted:
            return None
        if self.checker is None:
            from diffusers.utils import is_cosmos_guardrail_available

            if not is_cosmos_guardrail_available():
                raise BackendUnavailableError(GUARDRAIL_HELP)
            from cosmos_guardrail import CosmosSafetyChecker

            self.checker = CosmosSafetyChecker()
        return self.checker

    def check_prompt(self, wanted: bool, prompt: str):
        """The checker for a call whose prompt has passed (``None`` without guardrails)."""
        checker = self.get(wanted)
        if checker is not None and not checker.check_text_safety(prompt):
            raise GuardrailError("the Cosmos guardrails blocked the prompt; rephrase it.")
        return checker

    @staticmethod
    def check_frames(checker, frames: np.ndarray) -> np.ndarray:
        if checker is None:
            return frames
        checked = checker.check_video_safety(frames)
        if checked is None:
            raise GuardrailError("the Cosmos guardrails blocked the generated video.")
        return np.asarray(checked, dtype=np.uint8)
