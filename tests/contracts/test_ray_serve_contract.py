"""``protocol/ray_serve.py`` held to the framework's Ray Serve app at 5eee9ed (``fixtures/ray_serve-5eee9ed.json``,
read from ``inference/ray/serve.py``, ``common/args.py``, ``args.py`` and the deploy configs by
``scripts/refresh_contracts.py --only ray-serve``)."""

from __future__ import annotations

import jsonschema
import pytest

from cosmos_helpers.protocol import framework as fw
from cosmos_helpers.protocol import ray_serve as rs
from cosmos_helpers.protocol import step_cache

from .conftest import load


@pytest.fixture(scope="module")
def ray_contract() -> dict:
    return load("ray_serve")


def test_the_fixture_is_of_the_commit_the_facts_name_and_reuses_the_framework_sample_schema(ray_contract):
    assert ray_contract["commit"] == rs.COMMIT == step_cache.FRAMEWORK_COMMIT
    reference = ray_contract["sample_overrides_schema"]
    assert reference == {"package_data": f"framework_sample_schema-{rs.COMMIT}.json"} == {"package_data":
                                                                                           fw.SAMPLE_SCHEMA_FILE}
    assert fw.sample_overrides_schema()["title"] == "OmniSampleOverrides"
    assert "pydantic" in ray_contract["derivation"] and "not imported" in ray_contract["derivation"]


def test_routes_answers_and_the_unknown_model(ray_contract):
    routes = {(r["method"], r["path"]): r for r in ray_contract["routes"]}
    assert set(rs.ROUTES) | {("GET", rs.OUTPUTS + "/{path}")} == set(routes)
    assert routes[("POST", rs.GENERATE)]["body"] == "OmniSampleOverrides"
    assert routes[("POST", rs.GENERATE)]["reply"] == "SampleOutputs"
    assert routes[("GET", rs.MODELS)]["reply"] == "list[str]"
    assert list(rs.INFO_KEYS) == ray_contract["info_keys"]["info"]
    assert list(rs.ENVIRONMENT_KEYS) == ray_contract["info_keys"]["environment"]
    assert ray_contract["unknown_model"]["status"] == rs.UNKNOWN_MODEL_STATUS
    assert "Available models" in ray_contract["unknown_model"]["detail_template"]
    assert list(rs.SEED_RANGE) == ray_contract["seed_drawn"]
    assert ray_contract["output_folder"]["template"].startswith(f"f'{rs.OUTPUT_FOLDER_PREFIX}")
    assert ray_contract["output_folder"]["timestamp_format"] == rs.TIMESTAMP_FORMAT
    outputs = ray_contract["schemas"]["SampleOutputs"]
    assert tuple(outputs["properties"]["status"]["enum"]) == rs.STATUSES
    assert outputs["required"] == ["args"] and outputs["additionalProperties"] is False


def test_deployment_settings_and_the_setup_a_sample_cannot_change(ray_contract):
    deployment = ray_contract["deployment"]
    assert deployment["batch"] == {"max_batch_size": rs.MAX_BATCH_SIZE, "batch_wait_timeout_s":
                                   rs.BATCH_WAIT_TIMEOUT_S}
    assert deployment["batch_timeout_s"] == rs.BATCH_TIMEOUT_S
    assert deployment["model"]["health_check_timeout_s"] == rs.HEALTH_CHECK_TIMEOUT_S
    assert deployment["placement_bundle"] == dict(rs.WORKER_BUNDLE) and deployment["worker"] == {"num_gpus": 1}
    assert ray_contract["app_name"] == rs.APP_NAME
    defaults = ray_contract["setup_overrides_defaults"]
    assert {k: defaults[k] for k in rs.SETUP_DEFAULTS} == dict(rs.SETUP_DEFAULTS)
    sample_fields = set(fw.sample_overrides_schema()["properties"])
    assert not {"diffusion_cache", "guardrails", "diffusion_cache_thresh"} & sample_fields  # setup only


def test_the_deploy_configs(ray_contract):
    configs = ray_contract["configs"]
    assert sorted(configs) == sorted(rs.CONFIGS)
    router_schema = ray_contract["schemas"]["OmniRouterDeploymentArgs"]
    for name, config in configs.items():
        (app,) = config["applications"]
        assert app["name"] == rs.APP_NAME and app["route_prefix"] == "/"
        jsonschema.validate(app["args"], router_schema)  # the derived schema takes the framework's own configs
        assert app["args"]["app"]["output_dir"] == rs.CONFIG_OUTPUT_DIR
        assert app["args"]["models"] == {rs.CONFIG_MODEL: {"setup": dict(rs.CONFIG_SETUP[name])}}
        assert "diffusion_cache" not in app["args"]["models"][rs.CONFIG_MODEL]["setup"]  # so the default: off
    assert all(any(f"{rs.CONFIG_DIR}/{name}" in line for line in rs.cluster_commands(name)) for name in configs)
    submit = ray_contract["submit_defaults"]
    assert (submit["port"], submit["timeout"]) == (rs.SUBMIT_PORT, rs.SUBMIT_TIMEOUT_S)


def test_the_step_cache_default_recorded_for_the_app_is_the_setups(ray_contract):
    assert ray_contract["setup_overrides_defaults"]["diffusion_cache"] is False
    assert "diffusion_cache" in step_cache.BACKEND_DEFAULT["framework-serve"]
    assert "off" in step_cache.BACKEND_DEFAULT["framework-serve"]
