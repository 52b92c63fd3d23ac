"""Grids from YAML, lists and CSV; every bad grid is refused before anything runs, naming the offender."""

from __future__ import annotations

import pytest

from cosmos_helpers.errors import ValidationError
from cosmos_helpers.sweeps.dispatch import make_slots
from cosmos_helpers.sweeps.grid import load_grid, run_name, run_names, validate_sets


def test_yaml_mapping_is_the_cartesian_product_in_written_order(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text("seed: [0, 1]\nguidance: [1.5, 3.0]\nlabel: cat\n")
    assert load_grid(path) == [
        {"seed": 0, "guidance": 1.5, "label": "cat"}, {"seed": 0, "guidance": 3.0, "label": "cat"},
        {"seed": 1, "guidance": 1.5, "label": "cat"}, {"seed": 1, "guidance": 3.0, "label": "cat"}]


def test_yaml_list_gives_exactly_those_sets(tmp_path):
    path = tmp_path / "grid.yml"
    path.write_text("- {seed: 3}\n- {seed: 4, guidance: 2.0}\n")
    assert load_grid(path) == [{"seed": 3}, {"seed": 4, "guidance": 2.0}]


def test_csv_rows_are_sets_with_yaml_scalars(tmp_path):
    path = tmp_path / "grid.csv"
    path.write_text("seed,guidance,label\n0,1.5,cat\n1,3,'7'\n\n")
    assert load_grid(path) == [{"seed": 0, "guidance": 1.5, "label": "cat"}, {"seed": 1, "guidance": 3, "label": "7"}]


@pytest.mark.parametrize("grid, field, words", [
    ({}, "grid", "empty"),
    ({"seed": []}, "grid", "empty"),
    ([], "grid", "empty"),
    ({"seed": [1, 1]}, "grid", "twice"),
    ([{"seed": 1}, {"seed": 1}], "grid", "twice"),
    ([{"seed": 1}, 5], "grid[1]", "not a parameter set"),
    ("nope.txt", "grid", "not a file"),
    (42, "grid", "not a grid"),
])
def test_bad_grids_are_named(grid, field, words):
    with pytest.raises(ValidationError) as caught:
        load_grid(grid)
    assert caught.value.field == field and words in str(caught.value)


@pytest.mark.parametrize("text, words", [
    ("seed,guidance\n0\n", "has 1 cells"),
    ("seed,\n0,1\n", "empty or repeated column"),
    ("seed,guidance\n0,\n", "column 'guidance'"),
    ("", "empty"),
])
def test_bad_csv_is_named(tmp_path, text, words):
    path = tmp_path / "grid.csv"
    path.write_text(text)
    with pytest.raises(ValidationError, match=words):
        load_grid(path)


def test_unknown_parameter_names_it_and_lists_the_valid_ones(echo):
    with pytest.raises(ValidationError) as caught:
        validate_sets(echo, [{"seed": 1}, {"sead": 2}])
    assert caught.value.field == "grid parameter 'sead'"
    assert "seed, guidance, label, output_dir, server_url, fail_while, kill_worker_while" in str(caught.value)


@pytest.mark.parametrize("values, words", [
    ({"seed": 1.5}, "1.5 is a float; the notebook's default (0) is a int"),
    ({"seed": True}, "True is a bool"),
    ({"seed": "1"}, "'1' is a str"),
    ({"label": 3}, "3 is a int; the notebook's default (\"x\") is a str"),
])
def test_type_mismatch_against_the_default(echo, values, words):
    with pytest.raises(ValidationError, match=words.replace("(", r"\(").replace(")", r"\)")):
        validate_sets(echo, [values])


def test_compatible_types_pass(echo):
    # an int where the default is a float, anything where the default is None, None anywhere
    validate_sets(echo, [{"guidance": 3, "fail_while": "/x", "server_url": "http://h", "label": None}])


def test_reserved_names_and_notebooks_without_parameters(echo, tmp_path):
    with pytest.raises(ValidationError, match="set by the sweep itself"):
        validate_sets(echo, [{"output_dir": "x"}], reserved={"output_dir": "each run's own output folder"})
    import nbformat

    bare = tmp_path / "bare.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), str(bare))
    with pytest.raises(ValidationError, match="no cell tagged 'parameters'"):
        validate_sets(bare, [{"x": 2}])
    with pytest.raises(ValidationError, match="does not exist"):
        validate_sets(tmp_path / "missing.ipynb", [{"x": 2}])


def test_run_names_are_stable_safe_and_distinct():
    assert run_name({"seed": 0, "guidance": 3.5}) == run_name({"guidance": 3.5, "seed": 0}) == "guidance=3.5,seed=0"
    assert run_name({}) == "defaults"
    assert run_name({"flag": True, "x": None}) == "flag=true,x=null"
    lossy = [run_name({"prompt": "a/b c"}), run_name({"prompt": "a_b_c"}), run_name({"prompt": "a b/c"})]
    assert all("/" not in name and " " not in name for name in lossy)
    assert len(set(lossy)) == 3 and lossy[1] == "prompt=a_b_c"
    long = run_name({"prompt": "x" * 300})
    assert len(long) < 120
    assert run_names([{"p": "Cat"}, {"p": "cat"}])[0].lower() != run_names([{"p": "Cat"}, {"p": "cat"}])[1].lower()


def test_worker_slots():
    assert [s.describe() for s in make_slots(servers="http://a:1/,http://b:2")] == [
        {"slot": 0, "server_url": "http://a:1"}, {"slot": 1, "server_url": "http://b:2"}]
    assert [s.gpu for s in make_slots(gpus=[0, 1])] == ["0", "1"]
    assert len(make_slots(jobs=3)) == 3 and len(make_slots()) == 1
    for kwargs, words in [({"servers": "http://a", "gpus": "0"}, "not both"),
                          ({"gpus": "0", "jobs": 2}, "already set one worker each"),
                          ({"jobs": 0}, "positive integer"), ({"servers": "a:1"}, "not an http"),
                          ({"gpus": "0,,1"}, "empty entry"), ({"gpus": "cuda:0"}, "device index")]:
        with pytest.raises(ValidationError, match=words):
            make_slots(**kwargs)
