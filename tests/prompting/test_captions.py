"""Caption building and checking against the schema derived from the framework's caption templates."""

from __future__ import annotations

import json

import pytest

from cosmos_helpers.errors import OutputExistsError, ValidationError
from cosmos_helpers.prompting import blank_caption, build_caption, caption_schema, check_caption, save_caption
from cosmos_helpers.prompting.captions import schema_from_template


def _filled(kind: str = "video") -> dict:
    """A complete caption: the blank form with one subject and every text filled."""
    caption = blank_caption(kind)
    schema = caption_schema(kind)["properties"]

    def fill(value, sub):
        if sub.get("enum"):
            return sub["enum"][0]
        if sub.get("type") == "object" and "properties" in sub:
            return {k: fill(value.get(k) if isinstance(value, dict) else None, s) for k, s in sub["properties"].items()}
        if sub.get("type") == "array":
            return [fill(None, sub["items"])]
        if sub.get("type") == "integer":
            return 1
        if sub.get("pattern"):
            return "0:00-0:04"
        if sub.get("type") == "object":
            return {}
        return "a robot arm in a warehouse"

    return {key: fill(value, schema[key]) for key, value in caption.items()}


@pytest.mark.parametrize("kind", ["image", "video"])
def test_a_complete_caption_passes_and_builds(kind):
    caption = _filled(kind)
    check = check_caption(caption, kind)
    assert check.ok, check.explain()
    assert "complete" in check.explain()
    assert build_caption(kind, caption) == caption
    assert check_caption(json.dumps(caption)).kind == kind  # a JSON string, kind told from the fields


def test_blank_form_has_every_field_but_the_metadata_and_passes():
    form = blank_caption("video")
    assert "temporal_caption" in form and "resolution" not in form and form["subjects"] == []
    assert blank_caption("image")["subject_details"] == {}  # free-form keys: empty, not a placeholder key
    assert check_caption(form, "video").ok


def test_missing_fields_are_named_with_what_to_write():
    caption = _filled("video")
    del caption["temporal_caption"]
    del caption["subjects"][0]["pose"]
    check = check_caption(caption, "video")
    assert check.missing == ["temporal_caption", "subjects[0].pose"]
    text = check.explain()
    assert "temporal_caption: missing. Fix: add it: a temporally coherent" in text
    assert "subjects[0].pose: missing. Fix: add it: body position and posture." in text


def test_bad_values_each_name_the_field_and_the_fix():
    caption = _filled("video")
    caption["subjects"][0]["gender"] = "male"
    caption["subjects"][0]["number_of_arms"] = "two"
    caption["segments"][0]["segment_index"] = -1
    caption["actions"][0]["time"] = "0-4s"
    caption["lighting"] = "bright"
    caption["temporal_captoin"] = "typo"
    problems = {p.path: p for p in check_caption(caption, "video").problems}
    assert "use one of 'Male', 'Female', 'Unknown', ''" in problems["subjects[0].gender"].fix
    assert problems["subjects[0].number_of_arms"].problem == "expected a whole number, got text 'two'."
    assert "below 0" in problems["segments[0].segment_index"].problem
    assert problems["actions[0].time"].fix == "write e.g. '0:00-0:05'."
    assert problems["lighting"].fix.startswith("give an object ({...}): an object with conditions, direction")
    assert problems["temporal_captoin"].fix.startswith("did you mean 'temporal_caption'?")


def test_metadata_is_optional_but_checked_when_given():
    caption = _filled("video")
    assert check_caption(caption, "video").ok
    assert sorted(check_caption(caption, "video", require_metadata=True).missing) == [
        "aspect_ratio", "duration", "fps", "resolution"]
    caption.update(resolution={"H": 480, "W": 800}, aspect_ratio="16,9", duration="1s", fps=25)
    problems = {p.path: p for p in check_caption(caption, "video").problems}
    assert set(problems) == {"resolution", "duration", "fps"}
    assert "480p: {'H': 480, 'W': 832}" in problems["resolution"].fix
    caption.update(resolution={"H": 480, "W": 832}, duration="5s", fps=24.0)
    assert check_caption(caption, "video", require_metadata=True).ok


@pytest.mark.parametrize("bad, field, words", [
    (["a list"], "caption", "expected a JSON object"),
    ("a plain sentence", "caption", "not a JSON caption"),
    ({"subjects": []}, "kind", "cannot tell"),
    ({"temporal_caption": "x", "comprehensive_t2i_caption": "y"}, "kind", "cannot tell"),
])
def test_inputs_that_are_not_captions_are_refused(bad, field, words):
    with pytest.raises(ValidationError) as info:
        check_caption(bad)
    assert info.value.field == field and words in str(info.value)


def test_bad_kind_and_double_fields_are_refused():
    with pytest.raises(ValidationError, match="kind: 'movie' is not a caption kind"):
        check_caption({}, "movie")
    with pytest.raises(ValidationError, match="context: given both"):
        build_caption("video", {"context": "a"}, context="b")
    with pytest.raises(ValidationError) as info:
        build_caption("image", background_setting="a workshop")
    assert info.value.field == "caption" and "subjects: missing" in str(info.value)


def test_caption_file(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(_filled("image")))
    assert check_caption(path).ok
    with pytest.raises(ValidationError, match="does not exist"):
        check_caption(tmp_path / "missing.json")


def test_template_rules():
    assert schema_from_template("int; 2 for humans") == {"type": "integer", "minimum": 0,
                                                          "description": "int; 2 for humans"}
    assert schema_from_template("one of 'Male', 'Female'; '' if non-human")["enum"] == ["Male", "Female", ""]
    assert schema_from_template("must be one of: 10, 12, 14")["enum"] == [10, 12, 14]
    assert schema_from_template({"key_name_1": "free"})["additionalProperties"] == {"type": "string"}
    assert schema_from_template(["a sentence"]) == {"type": "array", "items": {"type": "string",
                                                                                "description": "a sentence"}}
    with pytest.raises(ValueError):
        schema_from_template([1, 2])


def test_save_caption_keeps_the_same_refuses_a_different_one(tmp_path):
    caption = _filled("image")
    first = save_caption(caption, tmp_path)
    assert first.name.startswith("image_caption_") and json.loads(first.read_text()) == caption
    assert save_caption(caption, tmp_path) == first  # the same caption: one file
    other = save_caption({**caption, "context": "another"}, tmp_path)
    assert other != first and len(list(tmp_path.iterdir())) == 2
    named = tmp_path / "mine.json"
    save_caption(caption, named)
    assert save_caption(caption, named) == named
    with pytest.raises(OutputExistsError):
        save_caption({**caption, "context": "another"}, named)
    assert json.loads(named.read_text()) == caption
    save_caption({**caption, "context": "another"}, named, overwrite=True)
    assert json.loads(named.read_text())["context"] == "another"
