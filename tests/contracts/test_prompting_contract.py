"""The prompting facts held to the fixture read from cosmos-framework and better-profanity by
``scripts/refresh_contracts.py --only prompting``: the package module, the upsampler's chat messages (made by
the framework's own builders), its pinned metadata, and the schema rules covering every template leaf."""

from __future__ import annotations

import json

import pytest

from cosmos_helpers.protocol.prompting import FACTS
from cosmos_helpers.prompting import Blocklist, caption_schema, chat_request
from cosmos_helpers.prompting.blocklist import find_blocked
from cosmos_helpers.prompting.captions import KINDS, schema_from_template
from cosmos_helpers.prompting.upsample import output_parameters
from cosmos_helpers.prompts import compact

from .conftest import load


@pytest.fixture(scope="module")
def contract() -> dict:
    return load("cosmos_framework_prompting")


def test_package_module_is_the_fixture(contract):
    """One home: the module is generated from the fixture; regenerate both with the refresh script."""
    expected = {key: value for key, value in contract.items() if key != "upsampler_samples"}
    expected["templates"] = {k: v for k, v in contract["templates"].items() if k.startswith("external_api/")}
    assert FACTS == expected
    assert contract["commit"] == "5eee9ed"


@pytest.mark.parametrize("mode, kind", [("text2image", "image"), ("text2video", "video")])
def test_messages_are_the_framework_upsamplers(contract, mode, kind):
    sample = contract["upsampler_samples"]
    body = chat_request(sample["sentence"], model="m", kind=kind, **sample[mode]["params"])
    assert body["messages"] == sample[mode]["messages"]


def test_pinned_metadata_is_the_frameworks(contract):
    params = contract["upsampler_samples"]["text2video"]["params"]
    assert output_parameters("video", **params) == contract["upsampler_samples"]["pinned_text2video"]


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_template_leaf_has_a_rule(contract, kind):
    """Each describing string becomes a typed rule; the closed fields keep the values the text lists."""
    template = json.loads(contract["templates"][KINDS[kind]])
    schema = caption_schema(kind)
    assert list(schema["properties"]) == list(template) == schema["required"]
    leaves = []

    def walk(node, sub):
        if isinstance(node, dict) and "properties" in sub:
            for key, value in node.items():
                walk(value, sub["properties"][key])
        elif isinstance(node, list):
            walk(node[0], sub["items"])
        elif isinstance(node, str):
            leaves.append((node, sub))

    walk(template, schema)
    for text, rule in leaves:
        if text.startswith("int;") or "resolution_ratio_dict" in text:
            assert rule["type"] == "integer"
        if "one of" in text:
            assert rule.get("enum"), text
    table = json.loads(contract["upsampler"]["resolution_ratio_dict_text"])
    assert all(set(schema["properties"]["aspect_ratio"]["enum"]) == set(sizes) for sizes in table.values())


def test_reasoner_templates_follow_the_same_rules(contract):
    """The rules are general: the reasoner templates in the fixture derive too."""
    for name, text in contract["templates"].items():
        if name.endswith("_json_schema.json") and "posttrained" not in name:
            schema = schema_from_template(json.loads(text))
            assert schema["additionalProperties"] is False and schema["required"]


def test_default_negative_prompt_trips_the_known_entries(contract):
    """NVIDIA/TensorRT-LLM#17523: the framework's own negative caption holds 'bleeding' and 'lifeless'."""
    negative = json.loads(contract["default_negative_prompt"])
    hits = find_blocked(compact(negative), Blocklist.known_subset())
    assert {hit.entry for hit in hits} == {"bleeding", "lifeless"}


def test_guardrail_facts(contract):
    guard = contract["guardrail"]
    assert guard["checkpoint"]["repository"] == "nvidia/Cosmos-Guardrail1"
    assert guard["list_folders"] == {"blocklist_words": "custom", "exact_match_words": "exact_match",
                                     "whitelist_words": "whitelist"}
    assert guard["calls_in_is_safe"][:3] == ["to_ascii", "self.censor_prompt", "nltk.word_tokenize"]
    assert contract["better_profanity"]["version"] == "0.7.0"


def test_where_vllm_omni_turns_guardrails_off(contract):
    """A shipped deploy config with guardrails: false is a switch a user may not know they flipped."""
    from cosmos_helpers.prompting.precheck import COVERAGE

    facts = contract["vllm_omni_guardrails"]
    assert facts["serve_flag"] == "--no-guardrails" and facts["per_request_key_in_extra_params"]
    assert "vllm_omni/deploy/cosmos3_omni.yaml" in facts["deploy_configs_with_guardrails_off"]
    assert "cosmos3_omni.yaml" in COVERAGE["vllm-omni"] and "--no-guardrails" in COVERAGE["vllm-omni"]
