"""The FP8 facts (``cosmos_helpers.protocol.fp8``) and what each backend sends for a precision, against the real stack's
own code: ``fixtures/fp8-*.json`` (``scripts/refresh_contracts.py --only fp8``) and, for the schedule, diffusers'
installed ``Cosmos3MixedPrecisionConfig`` resolving our call arguments."""

from __future__ import annotations

import json

import pytest

from cosmos_helpers import FP8, GenerationRequest, serve_command
from cosmos_helpers.precision import diffusers_call_kwargs, framework_flags, vllm_serve_flags
from cosmos_helpers.protocol import fp8 as facts

from .conftest import load


@pytest.fixture(scope="module")
def contract() -> dict:
    return load("fp8")


def test_the_fixture_is_of_the_pinned_upstreams(contract):
    assert contract["versions"] == {"diffusers": facts.DIFFUSERS_VERSION, "vllm_omni": facts.VLLM_OMNI_VERSION,
                                    "framework": facts.FRAMEWORK_COMMIT}


def test_the_policy_is_the_checkpoints(contract):
    diffusers, vllm = contract["diffusers"], contract["vllm_omni"]
    assert dict(facts.OFFICIAL_POLICY) == diffusers["official_policy"]
    assert list(facts.POLICY_FIELDS) == diffusers["policy_fields"]
    assert sorted(facts.POLICY_FIELDS) == vllm["policy_fields"]  # vLLM-Omni reads the same fields
    assert sorted(facts.REASONER_MODES) == vllm["override_reasoner"]


def test_diffusers_call_arguments_and_defaults(contract):
    diffusers = contract["diffusers"]
    assert dict(facts.DIFFUSERS_CALL_DEFAULTS) == diffusers["call_arguments"]
    assert sorted(facts.DIFFUSERS_FORMATS.values()) == diffusers["formats"]
    assert dict(facts.DIFFUSERS_REASONER) == diffusers["reasoner_from_policy"]
    assert sorted(facts.DIFFUSERS_REASONER.values()) == diffusers["reasoner_policies"]
    assert diffusers["no_policy"] == "none"  # a checkpoint without a policy: no schedule (W8A8 throughout)


@pytest.mark.parametrize(("schedule", "first", "last"), [("checkpoint", 3, 3), ("first_1_last_2", 1, 2)])
def test_the_schedule_rule_is_diffusers(contract, schedule, first, last):
    for steps, trace in contract["diffusers"]["schedules"][schedule].items():
        assert facts.policy_schedule(first, last, int(steps)) == trace, steps


@pytest.mark.parametrize("precision", [FP8(), FP8(first_steps=1, last_steps=2), FP8(reasoner="native"),
                                       FP8(mixed=False), FP8(mixed=True, first_steps=0, last_steps=5)])
def test_our_call_arguments_resolve_in_diffusers_as_asked(contract, precision):
    """The arguments we pass go through diffusers' own resolver on the official checkpoint config."""
    from diffusers.pipelines.cosmos.mixed_precision import Cosmos3MixedPrecisionConfig

    kwargs = diffusers_call_kwargs(precision)
    assert set(kwargs) <= set(contract["diffusers"]["call_arguments"])
    quant = {"quant_method": facts.QUANT_METHOD, "quant_type": facts.QUANT_TYPE,
             "runtime": {"diffusion_step_policy": dict(facts.OFFICIAL_POLICY)}}
    config = Cosmos3MixedPrecisionConfig.resolve(quantization_config=quant, **kwargs)
    if precision.mixed is False:
        assert config.format == "none"
        return
    first = 3 if precision.first_steps is None else precision.first_steps
    last = 3 if precision.last_steps is None else precision.last_steps
    assert [config.precision_name(i, 12) for i in range(12)] == facts.policy_schedule(first, last, 12)
    assert config.reasoner_policy == facts.DIFFUSERS_REASONER[precision.reasoner or "a16"]


def test_vllm_serve_flags_are_the_servers(contract):
    vllm = contract["vllm_omni"]
    for flag in (facts.VLLM_QUANTIZATION_CONFIG_FLAG, facts.VLLM_FORCE_CUTLASS_FLAG, facts.VLLM_KV_CACHE_DTYPE_FLAG):
        assert flag in vllm["serve_flags"]
    assert vllm["serve_flags"][facts.VLLM_FORCE_CUTLASS_FLAG]["action"] == "'store_true'"
    assert all(dtype in vllm["serve_flags"][facts.VLLM_KV_CACHE_DTYPE_FLAG]["help"]
               for dtype in facts.VLLM_KV_CACHE_DTYPES)
    assert "revision" in vllm["engine_fields"] and vllm["engine_fields"]["force_cutlass_fp8"] is False
    assert [facts.VLLM_MIXED_KEY] == vllm["additional_config_keys"]
    assert sorted(facts.VLLM_MIXED_FIELDS.values()) == vllm["override_fields"]
    assert {k: v for k, v in facts.VLLM_MIXED_DEFAULTS.items() if k != "enabled"} == vllm["override_defaults"]
    assert facts.QUANT_METHOD in vllm["modelopt_configs"]


@pytest.mark.parametrize("precision", [FP8(), FP8(first_steps=2, reasoner="native"), FP8(mixed=False)])
def test_serve_command_sends_only_what_vllm_omni_reads(contract, precision):
    argv = serve_command("nvidia/Cosmos3-Nano", precision=precision, force_cutlass_fp8=True, kv_cache_fp8=True).argv
    assert argv[argv.index(facts.VLLM_REVISION_FLAG) + 1] == facts.REVISION
    known = set(contract["vllm_omni"]["serve_flags"]) | {facts.VLLM_REVISION_FLAG, facts.VLLM_ADDITIONAL_CONFIG_FLAG}
    flags = vllm_serve_flags(precision, force_cutlass=True, kv_cache_fp8=True)
    assert {f for f in flags if f.startswith("--")} <= known
    if precision.given():
        override = json.loads(argv[argv.index(facts.VLLM_ADDITIONAL_CONFIG_FLAG) + 1])[facts.VLLM_MIXED_KEY]
        assert set(override) <= set(contract["vllm_omni"]["override_fields"])
        if precision.mixed is False:
            assert override == {"enabled": False}  # config.py: enabled=false takes no other field
    else:
        assert facts.VLLM_ADDITIONAL_CONFIG_FLAG not in argv  # the checkpoint's own policy


def test_framework_flag_and_values_are_the_frameworks(contract, tmp_path):
    framework = contract["framework"]
    assert facts.FRAMEWORK_QUANTIZATION_FLAG == framework["quantization_flag"]
    assert list(facts.FRAMEWORK_QUANTIZATION_METHODS) == framework["quantization_methods"]
    assert framework["quantization_overrides"]["quantization_method"] == repr(facts.FRAMEWORK_QUANTIZATION_DEFAULT)
    assert facts.FRAMEWORK_FP8_MARKER == framework["modelopt_marker"]
    assert facts.FRAMEWORK_STEP_POLICY is bool(framework["step_policy_files"])
    help_flags = load("cosmos_framework")["cli_flags"]  # the CLI's own --help lists the flag
    assert facts.FRAMEWORK_QUANTIZATION_FLAG in help_flags
    for method in framework["quantization_methods"]:
        request = GenerationRequest(mode="t2v", prompt="a red ball", profile="nano", precision=method)
        assert framework_flags(request.precision, request.model) == [facts.FRAMEWORK_QUANTIZATION_FLAG, method]
