"""The stand-in replica's work without Ray: what the framework's setup switches make of a refused sample, and the
answer's shape (the framework's ``SampleOutputs``, checked against the 5eee9ed fixture)."""

from __future__ import annotations

import json

import pytest

from cosmos_helpers.errors import ValidationError
from cosmos_helpers.standins.ray_serve.samples import BANNER, SampleSetup, run_sample, validated

from .contract import check_reply

BAD = {"name": "x", "model_mode": "text2video", "prompt": "a ball", "num_outputs": 2, "seed": 1, "model": "tiny"}


def test_a_refused_sample_is_a_500_by_default_skip_or_error_as_the_setup_says(tmp_path, tiny_backend):
    with pytest.raises(ValidationError, match="num_outputs"):
        run_sample(BAD, output_dir=tmp_path, folder="generate_a", backend=tiny_backend)
    assert json.loads((tmp_path / "generate_a" / "sample_args.json").read_text())["name"] == "x"
    skipped = run_sample(BAD, output_dir=tmp_path, folder="generate_b", backend=tiny_backend,
                         setup=SampleSetup(skip_invalid_samples=True))
    failed = run_sample(BAD, output_dir=tmp_path, folder="generate_c", backend=tiny_backend,
                        setup=SampleSetup(keep_going=True))
    for reply, status in ((skipped, "skip"), (failed, "error")):
        check_reply(reply)
        assert reply["status"] == status and "num_outputs" in reply["message"] and reply["outputs"] == []
    assert failed["stack_trace"].startswith("Traceback") and failed["message"].startswith("Error generating sample 'x'")


def test_a_sample_runs_on_the_tiny_model_and_says_it_is_a_stand_in(tmp_path, tiny_backend):
    item = {"name": "t2i", "model_mode": "text2image", "prompt": "a red ball", "resolution": "256", "num_steps": 2,
            "seed": 5, "model": "tiny", "output_dir": str(tmp_path / "generate_d")}
    reply = run_sample(item, output_dir=tmp_path, folder="generate_d", backend=tiny_backend)
    check_reply(reply)
    assert reply["outputs"][0]["files"] == ["generate_d/vision.jpg"] and (tmp_path / "generate_d/vision.jpg").is_file()
    standin = reply["outputs"][0]["content"]["standin"]
    assert standin["what"] == BANNER and standin["model_ran"] == "tiny" and "stand-in" in BANNER
    assert reply["args"]["seed"] == 5


def test_the_body_check_is_fastapis_422():
    from fastapi.exceptions import RequestValidationError

    assert validated({"name": "x", "prompt": "p"}) == {"name": "x", "prompt": "p"}
    with pytest.raises(RequestValidationError) as error:
        validated({"name": "x", "resolution": "128", "bogus": 1})
    locations = sorted(tuple(e["loc"]) for e in error.value.errors())
    assert locations == [("body", "bogus"), ("body", "resolution")]
