"""Numeric precision as one request option: ``GenerationRequest(precision=None | "fp8" | FP8(...) | "mxfp8")``.

A request field, not profiles: FP8 is another revision of the *same* checkpoint, so it composes with every profile and
``model=`` and is in every fingerprint. ``None`` / ``"bf16"``: the bf16 weights; ``"fp8"`` = ``FP8()``: NVIDIA's
ModelOpt FP8 revision with the checkpoint's per-step policy (W8A16 first and last steps, W8A8 between); ``"mxfp8"`` /
``"nvfp4"``: the Cosmos Framework's load-time quantization (Blackwell only). Facts: :mod:`cosmos_helpers.protocol.fp8`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Union

from .errors import ValidationError
from .protocol import fp8 as facts


@dataclass(frozen=True)
class FP8:
    """NVIDIA's ModelOpt FP8 revision of the request's checkpoint; a field left ``None`` keeps the checkpoint's policy.

    Args:
        mixed: ``None`` follows the checkpoint's ``diffusion_step_policy``; ``False`` runs native W8A8 on every step
            (what a checkpoint without a policy, e.g. a distilled one, does); ``True`` applies the first/last schedule
            even where the checkpoint declares none.
        first_steps / last_steps: how many denoising steps at the start / end run W8A16 (FP8 weights, 16-bit
            activations); the published video checkpoints say 3 and 3.
        reasoner: ``"a16"`` (the text pathway at W8A16, the published choice) or ``"native"`` (W8A8).
    """

    mixed: bool | None = None
    first_steps: int | None = None
    last_steps: int | None = None
    reasoner: str | None = None

    def __post_init__(self) -> None:
        if self.mixed is not None and not isinstance(self.mixed, bool):
            raise ValidationError("precision.mixed", f"expected True, False or None, got {self.mixed!r}.",
                                  "leave it out (the checkpoint's policy), or False for W8A8 on every step.")
        for name in ("first_steps", "last_steps"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValidationError(f"precision.{name}", f"{value!r} is not a whole number of at least 0.",
                                      f"pass e.g. FP8({name}=3), or leave it out for the checkpoint's policy.")
        if self.reasoner is not None and self.reasoner not in facts.REASONER_MODES:
            raise ValidationError("precision.reasoner", f"{self.reasoner!r} is not one of "
                                  f"{', '.join(facts.REASONER_MODES)}.",
                                  "use 'a16' (text pathway at 16-bit activations) or 'native' (W8A8).")
        if self.mixed is False and any(v is not None for v in (self.first_steps, self.last_steps, self.reasoner)):
            raise ValidationError("precision.mixed", "mixed=False runs W8A8 on every step, so a W8A16 schedule "
                                  "cannot go with it.", "drop mixed=False, or drop first_steps/last_steps/reasoner.")

    def given(self) -> dict[str, Any]:
        return {name: value for name, value in asdict(self).items() if value is not None}

    @property
    def native_throughout(self) -> bool:
        """W8A8 on every step: ``mixed=False``, or no W8A16 step and the reasoner native."""
        return self.mixed is False or (self.first_steps == 0 and self.last_steps == 0 and self.reasoner == "native")


Precision = Union[None, str, FP8]
_NAMED: dict[str, Precision] = {"bf16": None, "bfloat16": None, facts.REVISION: FP8(),  # a name given -> as stored
                                **{method: method for method in facts.FRAMEWORK_QUANTIZATION_METHODS}}


def check_precision(value: Any) -> Precision:
    """The request's ``precision`` as stored: ``None``, an :class:`FP8`, or a runtime method name."""
    if value is None or isinstance(value, FP8):
        return value
    text = value.strip().lower().replace("-", "") if isinstance(value, str) else None
    if text in _NAMED:
        return _NAMED[text]
    raise ValidationError("precision", f"{value!r} is not a precision choice.",
                          "pass None (the checkpoint's bf16 weights), 'fp8' or FP8(...) (NVIDIA's ModelOpt FP8 "
                          "revision; from cosmos_helpers import FP8), or 'mxfp8' / 'nvfp4' (the Cosmos Framework "
                          "on a Blackwell GPU).")


def precision_record(value: Precision) -> Any:
    """The JSON form in a request's record (and fingerprint): ``{"fp8": {given}}`` or the method name."""
    return {facts.REVISION: value.given()} if isinstance(value, FP8) else value


def describe(value: Precision, backend: str) -> dict[str, Any]:
    """What ``backend`` runs for ``value``, for the manifest: the choice, where it came from, the settings."""
    if value is None:
        return {"choice": "default", "source": f"{backend} default: {facts.BACKEND_DEFAULT[backend]}"}
    if isinstance(value, FP8):
        return {"choice": facts.REVISION, "source": "request", "revision": facts.REVISION,
                "schedule": value.given() or "the checkpoint's diffusion_step_policy"}
    return {"choice": value, "source": "request", "method": value}


def check_for_backend(value: Precision, backend: str) -> None:
    """Refuse, before any work, a precision ``backend`` cannot run as asked (its own check may add more)."""
    assert backend in facts.BACKEND_DEFAULT, backend
    if value is None:
        return
    if isinstance(value, str) and backend != "framework":
        raise ValidationError("precision", f"{value!r} is the Cosmos Framework's load-time quantization "
                              f"({facts.FRAMEWORK_QUANTIZATION_FLAG}); the {backend} backend has no such method.",
                              "run it on FrameworkBackend (Blackwell GPUs), or use precision='fp8' (NVIDIA's FP8 "
                              "checkpoint) here.")
    if backend == "vllm-omni":
        spelling = "'fp8'" if value == FP8() else repr(value)
        raise ValidationError("precision", "vLLM-Omni loads the checkpoint's revision and its precision policy when "
                              "the server starts, so a request cannot choose them.",
                              f"start the server with serve_command(model, precision={spelling}) and leave "
                              "precision out of the request (the manifest records the server's), or run on "
                              "DiffusersBackend.")
    if backend == "framework" and isinstance(value, FP8) and not value.native_throughout:
        raise ValidationError("precision", f"the Cosmos Framework at {facts.FRAMEWORK_COMMIT} runs a ModelOpt FP8 "
                              "checkpoint at W8A8 on every step: it has no per-step precision policy.",
                              "use precision=FP8(mixed=False) with model= a local FP8 checkpoint folder, or run the "
                              "official schedule on DiffusersBackend or a vLLM-Omni server.")


def diffusers_call_kwargs(value: Precision) -> dict[str, Any]:
    """The ``Cosmos3OmniPipeline.__call__`` arguments of an :class:`FP8`'s given fields."""
    if not isinstance(value, FP8):
        return {}
    translated = {"mixed": facts.DIFFUSERS_FORMATS, "reasoner": facts.DIFFUSERS_REASONER}
    return {facts.DIFFUSERS_CALL_ARGS[name]: translated[name][given] if name in translated else given
            for name, given in value.given().items()}


def vllm_serve_flags(value: Precision, *, force_cutlass: bool = False, kv_cache_fp8: bool = False) -> list[str]:
    """The ``vllm serve`` flags that load ``value``: ``--revision fp8`` and, for given schedule fields,
    ``--additional-config`` (it replaces the checkpoint's whole policy, missing fields at vLLM-Omni's 3, 3, a16)."""
    if isinstance(value, str):
        check_for_backend(value, "vllm-omni")
    if force_cutlass and not isinstance(value, FP8):
        raise ValidationError("force_cutlass_fp8", "it picks the kernels of a ModelOpt FP8 checkpoint, and this "
                              "server loads the bf16 weights.", "add precision='fp8', or drop force_cutlass_fp8.")
    flags = [facts.VLLM_REVISION_FLAG, facts.REVISION] if isinstance(value, FP8) else []
    if isinstance(value, FP8) and value.given():
        override = {facts.VLLM_MIXED_FIELDS[name]: v for name, v in value.given().items()}
        flags += [facts.VLLM_ADDITIONAL_CONFIG_FLAG, json.dumps({facts.VLLM_MIXED_KEY: override},
                                                                separators=(",", ":"))]
    if force_cutlass:
        flags.append(facts.VLLM_FORCE_CUTLASS_FLAG)
    if kv_cache_fp8:
        flags += [facts.VLLM_KV_CACHE_DTYPE_FLAG, "fp8"]
    return flags


def framework_flags(value: Precision, model: str) -> list[str]:
    """The framework's flags for ``value`` with ``model``, refusing what it would run otherwise than asked (FP8 is a
    local ModelOpt folder, ``hf_quant_config.json``, and runs as FP8 whatever the request says)."""
    check_for_backend(value, "framework")
    folder = Path(str(model)).expanduser()
    modelopt = folder.is_dir() and (folder / facts.FRAMEWORK_FP8_MARKER).is_file()
    if isinstance(value, FP8) and not modelopt:
        raise ValidationError("precision", f"the Cosmos Framework runs ModelOpt FP8 from a local checkpoint folder "
                              f"with {facts.FRAMEWORK_FP8_MARKER}; {model!r} is not one (a hub name loads the bf16 "
                              "weights).", "download the FP8 checkpoint and pass model='/path/to/it', or run "
                              "precision='fp8' on DiffusersBackend.")
    if modelopt and not isinstance(value, FP8):
        what = f"{facts.FRAMEWORK_QUANTIZATION_FLAG} {value}" if value else "the bf16 default"
        raise ValidationError("precision", f"{model} is a ModelOpt FP8 checkpoint ({facts.FRAMEWORK_FP8_MARKER}), "
                              f"which the framework runs at W8A8 whatever the request says; it asks for {what}.",
                              "use precision=FP8(mixed=False) with this folder, or point model= at a bf16 checkpoint.")
    return [facts.FRAMEWORK_QUANTIZATION_FLAG, value] if isinstance(value, str) else []

