"""``GenerationRequest(precision=...)``: what the request keeps, what goes into its fingerprint, and what each backend
refuses before any work (field, backend, fix). Nothing here loads a model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cosmos_helpers import FP8, DiffusersBackend, FrameworkBackend, GenerationRequest, VllmOmniBackend, serve_command
from cosmos_helpers.errors import ValidationError
from cosmos_helpers.protocol import fp8 as facts


def t2v(**changes):
    return GenerationRequest(mode="t2v", prompt="A red ball rolls to the left across a grey floor.",
                             **changes).resolve()


def test_precision_is_kept_and_is_part_of_the_fingerprint():
    plain, fp8 = t2v(), t2v(precision="fp8")
    assert fp8.precision == FP8() and plain.precision is None
    assert "precision" not in plain.to_dict()  # the default leaves old fingerprints as they were
    assert fp8.to_dict()["precision"] == {"fp8": {}}
    assert t2v(precision="bf16").fingerprint() == plain.fingerprint() != fp8.fingerprint()
    assert t2v(precision=FP8(first_steps=2)).fingerprint() != fp8.fingerprint()
    assert t2v(precision=FP8(first_steps=2)).to_dict()["precision"] == {"fp8": {"first_steps": 2}}
    assert t2v(precision="mxfp8").to_dict()["precision"] == "mxfp8"
    assert fp8.replace(seed=3).precision == FP8()


@pytest.mark.parametrize(("value", "field"), [
    ("int8", "precision"), (8, "precision"), (FP8, "precision"),
])
def test_unknown_precisions_are_refused(value, field):
    with pytest.raises(ValidationError) as info:
        t2v(precision=value)
    assert info.value.field == field and info.value.fix


@pytest.mark.parametrize(("kwargs", "field"), [
    (dict(first_steps=-1), "precision.first_steps"), (dict(last_steps=True), "precision.last_steps"),
    (dict(reasoner="high_precision"), "precision.reasoner"), (dict(mixed="yes"), "precision.mixed"),
    (dict(mixed=False, first_steps=2), "precision.mixed"),
])
def test_fp8_fields_are_checked(kwargs, field):
    with pytest.raises(ValidationError) as info:
        FP8(**kwargs)
    assert info.value.field == field and info.value.fix


def test_native_throughout():
    assert FP8(mixed=False).native_throughout
    assert FP8(first_steps=0, last_steps=0, reasoner="native").native_throughout
    assert not FP8().native_throughout and not FP8(first_steps=0, last_steps=0).native_throughout


# diffusers --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("backend_kwargs", "request_kwargs", "field"), [
    (dict(fast=True), dict(precision="fp8"), "fast"),
    (dict(weight_storage="fp8"), dict(precision="fp8"), "weight_storage"),
    (dict(), dict(precision="mxfp8"), "precision"),
    (dict(), dict(precision="nvfp4"), "precision"),
    (dict(gpus=2), dict(precision="fp8"), "precision"),
    (dict(), dict(precision="fp8", profile="tiny-distilled", mode="t2i"), "precision"),
    (dict(), dict(precision="fp8", profile="tiny-edge"), "precision"),
])
def test_diffusers_refuses_what_it_cannot_run_before_loading(backend_kwargs, request_kwargs, field):
    backend = DiffusersBackend(device="cpu", progress=False, **backend_kwargs)
    request = GenerationRequest(**{"mode": "t2v", "prompt": "A red ball.", **request_kwargs})
    with pytest.raises(ValidationError) as info:
        backend.check(request)
    assert info.value.field == field and info.value.fix
    backend.close()


def test_diffusers_refuses_a_local_folder_that_is_not_what_the_request_says(tmp_path):
    bf16, fp8 = tmp_path / "bf16", tmp_path / "fp8"
    for folder, config in ((bf16, {}), (fp8, {"quantization_config": {"quant_method": "modelopt",
                                                                      "quant_type": "FP8"}})):
        (folder / "transformer").mkdir(parents=True)
        (folder / "model_index.json").write_text("{}")
        (folder / "transformer" / "config.json").write_text(json.dumps(config))
    backend = DiffusersBackend(device="cpu", progress=False)
    with pytest.raises(ValidationError, match="not a ModelOpt FP8 checkpoint") as info:
        backend.check(t2v(model=str(bf16), precision="fp8"))
    assert info.value.field == "model"
    with pytest.raises(ValidationError, match="is a ModelOpt FP8 checkpoint") as info:
        backend.check(t2v(model=str(fp8)))  # an FP8 run the manifest would call bf16
    assert info.value.field == "precision"
    backend.check(t2v(model=str(fp8), precision="fp8"))
    with pytest.raises(ValidationError) as info:
        backend.check(GenerationRequest(mode="i2i", prompt="make it blue", image=np.zeros((64, 64, 3), np.uint8),
                                        model=str(fp8), precision="fp8"))
    assert info.value.field == "precision" and "mixed=False" in info.value.fix


def test_the_old_fp8_keyword_is_refused_with_both_new_names():
    with pytest.raises(ValidationError) as info:
        DiffusersBackend(device="cpu", fp8=True)
    assert info.value.field == "fp8"
    assert "weight_storage='fp8'" in info.value.fix and "precision='fp8'" in info.value.fix


def test_call_arguments_carry_only_the_overrides():
    backend = DiffusersBackend(device="cpu", progress=False)
    assert not any(k.startswith("mixed_precision") for k in backend.pipeline_kwargs(t2v(precision="fp8")))
    kwargs = backend.pipeline_kwargs(t2v(precision=FP8(first_steps=1, reasoner="native")))
    assert {k: v for k, v in kwargs.items() if k.startswith("mixed_precision")} == {
        "mixed_precision_first_steps": 1, "mixed_precision_reasoner_policy": "base_precision"}
    assert backend.pipeline_kwargs(t2v(precision=FP8(mixed=False)))["mixed_precision_format"] == "none"


# vLLM-Omni and the framework -------------------------------------------------------------------------------------

def test_vllm_omni_refuses_a_request_precision_and_serve_command_prints_it():
    backend = VllmOmniBackend("http://127.0.0.1:9")
    with pytest.raises(ValidationError) as info:
        backend.generate(t2v(precision="fp8"))  # refused before anything is sent (nothing listens there)
    assert info.value.field == "precision" and "serve_command" in info.value.fix
    with pytest.raises(ValidationError, match="Framework"):
        backend.generate(t2v(precision="nvfp4"))
    assert "--revision fp8" in serve_command("nvidia/Cosmos3-Nano", precision="fp8").shell()
    assert facts.VLLM_REVISION_FLAG not in serve_command("nvidia/Cosmos3-Nano").argv
    with pytest.raises(ValidationError) as info:
        serve_command("nvidia/Cosmos3-Nano", force_cutlass_fp8=True)
    assert info.value.field == "force_cutlass_fp8"
    with pytest.raises(ValidationError):
        serve_command("nvidia/Cosmos3-Nano", precision="mxfp8")


def test_framework_passes_the_quantization_method_and_refuses_what_it_cannot_run(tmp_path):
    backend = FrameworkBackend(tmp_path, work_dir=tmp_path / "runs", progress=False)
    nano = dict(profile="nano", tier="480")
    request = t2v(precision="nvfp4", **nano)
    from cosmos_helpers.precision import framework_flags

    flags = framework_flags(request.precision, request.model)
    run = backend.prepare({"name": "x"}, name="x", model=request.model, guardrails=False, flags=flags)
    assert run.command[run.command.index(facts.FRAMEWORK_QUANTIZATION_FLAG) + 1] == "nvfp4"
    assert facts.FRAMEWORK_QUANTIZATION_FLAG not in backend.command("i.json", "o", model=request.model,
                                                                    guardrails=False)
    with pytest.raises(ValidationError, match="no per-step precision policy") as info:
        backend.generate(t2v(precision="fp8", **nano))
    assert info.value.field == "precision"
    with pytest.raises(ValidationError, match="local checkpoint folder"):
        backend.generate(t2v(precision=FP8(mixed=False), **nano))
    folder = tmp_path / "nano-fp8"
    folder.mkdir()
    (folder / facts.FRAMEWORK_FP8_MARKER).write_text('{"quant_method": "modelopt", "quant_algo": "FP8"}')
    assert framework_flags(FP8(mixed=False), str(folder)) == []  # taken by the folder, nothing on the command line
    for wrong in (None, "mxfp8"):  # the framework would run W8A8 and the manifest would say otherwise
        with pytest.raises(ValidationError, match="ModelOpt FP8 checkpoint"):
            framework_flags(wrong, str(folder))
    assert not list((tmp_path / "runs").glob("*-t2v*"))  # refused before anything was written
