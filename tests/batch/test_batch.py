"""Batches without Ray: lines read and checked before any work, the local path, resume, reports and the plot."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from cosmos_helpers import GenerationRequest, media
from cosmos_helpers.batch import load_items, run_batch, write_items
from cosmos_helpers.batch.runner import ItemRecord, retryable
from cosmos_helpers.batch.runner import BatchResult
from cosmos_helpers.cli import main
from cosmos_helpers.errors import OutputExistsError, ValidationError
from cosmos_helpers.views.timeline import batch_timeline

REQUEST = {"name": "ball", "mode": "text2image", "prompt": "a red ball", "tier": "128", "num_inference_steps": 2,
           "seed": 4}
SAMPLE = {"name": "box", "model_mode": "text2image", "prompt": "a blue box", "num_steps": 2, "seed": 5}


@pytest.mark.parametrize("lines, field, words", [
    (['{"mode": "text2image", "prompt": "p"}', "not json"], "requests.jsonl line 2", "not JSON"),
    (['{"mode": "text2image", "prompt": "p", "colour": 1}'], "line 1", "unexpected keyword"),
    (['{"mode": "text2image", "prompt": "p", "tier": "333"}'], "tier", "333"),
    (['{"model_mode": "text2image", "prompt": "p", "resolutoin": "256"}'], "resolutoin", "did you mean"),
    (['{"name": "a", "mode": "t2i", "prompt": "p"}', '{"name": "a", "mode": "t2i", "prompt": "q"}'], "name", "two"),
])
def test_every_line_is_checked_when_the_file_is_read(tmp_path, lines, field, words):
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValidationError) as error:
        load_items(path)
    assert error.value.field == field and words in str(error.value)


def test_lines_are_requests_or_framework_samples_named_as_the_framework_names_jsonl_lines(tmp_path):
    path = write_items(tmp_path / "requests.jsonl", [REQUEST, {k: v for k, v in SAMPLE.items() if k != "name"}])
    items = load_items(path)
    assert [(i.name, i.kind) for i in items] == [("ball", "request"), ("requests_1", "sample")]
    assert items[0].request().seed == 4 and items[1].sample().name == "requests_1"


def test_the_local_path_runs_here_resumes_and_refuses_another_requests_output(tmp_path, tiny_backend):
    path = write_items(tmp_path / "requests.jsonl", [REQUEST, SAMPLE])
    out = tmp_path / "out"
    result = run_batch(path, out, backend=tiny_backend)
    assert result.ok and result.where == "this process" and [r.status for r in result.records] == ["ok", "ok"]
    made = tiny_backend.generate(GenerationRequest(**{k: v for k, v in REQUEST.items() if k != "name"}))
    np.testing.assert_array_equal(media.read_image(out / "ball" / "vision.png"), made.frames[0])
    assert (out / "box" / "vision.jpg").is_file()  # a framework sample is saved as the framework saves it
    with open(out / "summary.csv") as handle:
        assert [row["status"] for row in csv.DictReader(handle)] == ["ok", "ok"]
    assert (out / "index.html").is_file() and json.loads((out / "batch.json").read_text())["facts"]["items"] == 2

    assert main(["batch", str(path), "--out", str(out), "--no-gallery"]) == 0  # the CLI: all skipped
    assert [r["status"] for r in json.loads((out / "batch.json").read_text())["items"]] == ["skipped", "skipped"]
    write_items(path, [{**REQUEST, "seed": 9}, SAMPLE])
    with pytest.raises(OutputExistsError, match="ball"):
        run_batch(path, out, backend=tiny_backend)


def test_which_failures_are_tried_again():
    assert retryable("ServerError") and retryable("WorkerLostError") and retryable("ConnectionLostError")
    assert not retryable("ValidationError") and not retryable("RequestValidationError")
    assert not retryable("UnknownModelError") and not retryable("SampleSkippedError")


def test_the_timeline_draws_a_row_per_worker(tmp_path):
    records = [ItemRecord(f"i{n}", "request", "text2image", status="ok", worker=f"w{n % 2}", started=n, finished=n + 1)
               for n in range(4)] + [ItemRecord("old", "request", "text2image", status="skipped")]
    figure = batch_timeline(BatchResult(tmp_path, records, "here"), display=False)
    timeline, times = figure.axes
    assert [t.get_text() for t in timeline.get_yticklabels()] == ["here\nw0", "here\nw1"]
    assert len(timeline.patches) == 4 and len(times.patches) == 5
