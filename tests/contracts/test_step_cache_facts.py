"""``cosmos_helpers/protocol/step_cache.py`` held to the three stacks' own code (``step_cache-*.json``, written by
``scripts/refresh_contracts.py --only step-cache``): every field name, flag, key and default."""

from __future__ import annotations

import dataclasses

import pytest

from cosmos_helpers import SeaCache
from cosmos_helpers.protocol import step_cache as facts
from cosmos_helpers.protocol import vllm_omni as vo
from cosmos_helpers.protocol.table import defaults_table

from .conftest import load

FIXTURE = load("step_cache")
DIFFUSERS, VLLM, FRAMEWORK = FIXTURE["diffusers"], FIXTURE["vllm_omni"], FIXTURE["framework"]
OURS = [f.name for f in dataclasses.fields(SeaCache)]


def test_the_fixture_is_of_the_versions_the_facts_name():
    assert (DIFFUSERS["version"], FRAMEWORK["commit"], VLLM["version"]) == (
        facts.DIFFUSERS_VERSION, facts.FRAMEWORK_COMMIT, facts.VLLM_OMNI_VERSION)
    assert set(facts.FIELDS) == set(OURS) == set(facts.FRAMEWORK_CONFIG_NAMES)


def test_diffusers_names_and_defaults():
    config = DIFFUSERS["SeaCacheConfig"]
    assert {names[0] for names in facts.FIELDS.values()} == set(config)  # every field, each settable
    for ours, names in facts.FIELDS.items():
        assert facts.DIFFUSERS_DEFAULTS[ours] == config[names[0]], ours
    assert list(facts.RESIDUAL_ORDERS["diffusers"]) == DIFFUSERS["accepted_residual_orders"]


def test_vllm_omni_keys_defaults_and_flags():
    keys = VLLM["sea_cache_keys"]
    assert {names[1] for names in facts.FIELDS.values() if names[1]} == set(keys)
    for ours, names in facts.FIELDS.items():
        if names[1] is not None:
            assert facts.VLLM_OMNI_DEFAULTS[ours] == keys[names[1]], ours
            assert VLLM["sea_cache_reads"][names[0]] == names[1]  # the adapter's argument is diffusers' name
    # not settable: the hook always computes the first and the last step
    assert facts.VLLM_OMNI_DEFAULTS["retention_steps"] == VLLM["always_computed"]["first_steps"]
    assert facts.VLLM_OMNI_DEFAULTS["cache_end_steps"] == VLLM["always_computed"]["last_steps"]
    flags = VLLM["serve_flags"]
    assert set(flags) == {facts.VLLM_CACHE_BACKEND_FLAG, facts.VLLM_CACHE_CONFIG_FLAG}
    assert flags[facts.VLLM_CACHE_BACKEND_FLAG]["default"] == "none" and "none" in facts.BACKEND_DEFAULT["vllm-omni"]
    assert set(facts.VLLM_CACHE_BACKENDS) <= set(VLLM["cache_backends"])
    assert facts.VLLM_SEA_CACHE in facts.VLLM_CACHE_BACKENDS
    assert vo.PIPELINE_CLASS in VLLM["pipelines"]  # serve_command's pipeline has a SeaCache adapter


def test_the_residual_orders_follow_each_stacks_check():
    """vLLM-Omni and the framework refuse only a negative order (any order extrapolates), so they take 2, the most
    a SeaCache here may ask for; diffusers checks for 0 or 1."""
    for checks, backend in ((VLLM["sea_config_checks"], "vllm-omni"), (FRAMEWORK["config_checks"], "framework")):
        assert checks["residual_order"].endswith("self.residual_order < 0"), checks
        assert facts.RESIDUAL_ORDERS[backend] == (0, 1, 2)
    with pytest.raises(Exception):
        SeaCache(residual_order=3)


def test_framework_flags_config_and_defaults():
    config = FRAMEWORK["config_defaults"]
    for ours, name in facts.FRAMEWORK_CONFIG_NAMES.items():
        if name is None:  # no limit on skips in a row; 0 means no limit here, as in diffusers
            assert facts.FRAMEWORK_DEFAULTS[ours] == 0 and "max_consecutive" not in str(config)
        else:
            assert facts.FRAMEWORK_DEFAULTS[ours] == config[name], ours
    flags, keys = FRAMEWORK["flags"], FRAMEWORK["config_keys"]  # setup field -> flag, setup field -> Config key
    for ours, names in facts.FIELDS.items():
        flag = names[2]
        if flag is not None:
            field = next(f for f, f_flag in flags.items() if f_flag == flag)
            assert keys[field] == facts.FRAMEWORK_CONFIG_NAMES[ours], ours  # the flag sets our field's Config key
    assert set(keys) == {field for field in flags if field != "diffusion_cache"}  # every other knob is fixed
    assert (facts.FRAMEWORK_ON_FLAG, facts.FRAMEWORK_OFF_FLAG) == (flags["diffusion_cache"], FRAMEWORK["off_flag"])


def test_the_framework_cli_caches_by_default_though_its_setup_does_not(framework_contract):
    assert FRAMEWORK["cli_setup"] == {"diffusion_cache": True}
    assert FRAMEWORK["setup_fields"]["diffusion_cache"]["default"] is False
    assert facts.BACKEND_DEFAULT["framework"].startswith("on")
    real_flags = set(framework_contract["cli_flags"])  # the CLI's own --help
    assert {facts.FRAMEWORK_ON_FLAG, facts.FRAMEWORK_OFF_FLAG, *(n[2] for n in facts.FIELDS.values() if n[2])} \
        <= real_flags


def test_the_readme_table_has_the_step_cache_row():
    row = next(line for line in defaults_table().splitlines() if line.startswith("| `step_cache`"))
    assert "off" in row.split("|")[2] and f"threshold {facts.FRAMEWORK_DEFAULTS['threshold']:g}" in row.split("|")[4]
