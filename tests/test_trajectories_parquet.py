"""LeRobot parquet trajectories: our writer's round trip, files laid out as LeRobot writes them (several episodes,
rows out of order, the v2.1 one-file-per-episode and v3.0 chunked layouts), the errors, and the contract fixture
``contracts/fixtures/lerobot_info-*.json`` (a real LeRobot v3.0 ``meta/info.json``; its source is inside)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from cosmos_helpers.errors import OutputExistsError, ValidationError
from cosmos_helpers.trajectories import load_trajectory, save_trajectory

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

(FIXTURE_PATH,) = sorted((Path(__file__).parent / "contracts/fixtures").glob("lerobot_info-*.json"))
FIXTURE = json.loads(FIXTURE_PATH.read_text())
FEATURES = {key: ft for key, ft in FIXTURE["info"]["features"].items() if ft["dtype"] not in ("video", "image")}
FPS = FIXTURE["info"]["fps"]


def arrow_type(feature: dict) -> pa.DataType:
    """The Arrow type ``LeRobotDataset`` stores a feature as: a ``(1,)`` feature is a scalar, a ``(D,)`` one a
    ``fixed_size_list<dtype>[D]`` (lerobot ``get_hf_features_from_features`` -> ``datasets.Sequence(length=D)``,
    which ``datasets``' ``get_nested_type`` turns into ``pa.list_(type, D)``)."""
    scalar = pa.from_numpy_dtype(np.dtype(feature["dtype"]))
    shape = list(feature["shape"])
    return scalar if shape == [1] else pa.list_(scalar, shape[0])


def lerobot_table(lengths: dict[int, int], seed: int = 0) -> tuple[pa.Table, dict[int, dict[str, np.ndarray]]]:
    """A data file as LeRobot v3.0 writes one: the fixture's features, episodes one after another with ``index``
    running on, then the rows shuffled (a reader must not trust the stored order). Also each episode's
    ``action`` and ``observation.state`` in frame order, to compare with."""
    rng = np.random.default_rng(seed)
    columns: dict[str, list] = {key: [] for key in FEATURES}
    episodes, start = {}, 0
    for episode, length in lengths.items():
        frames = np.arange(length)
        per = {key: rng.normal(size=(length, ft["shape"][0])).astype(np.float32)
               for key, ft in FEATURES.items() if ft["shape"] != [1]}
        episodes[episode] = per
        per_frame = {"timestamp": (frames / FPS).astype(np.float32), "frame_index": frames,
                     "episode_index": np.full(length, episode), "index": start + frames,
                     "task_index": np.zeros(length, dtype=np.int64)}
        for key in FEATURES:
            columns[key] += list(per[key]) if key in per else list(per_frame[key])
        start += length
    order = rng.permutation(start)
    arrays = {key: pa.array([np.asarray(values[i]).tolist() for i in order], type=arrow_type(FEATURES[key]))
              for key, values in columns.items()}
    return pa.table(arrays), episodes


def write(table: pa.Table, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


# ---------------------------------------------------------------------------------------------- our writer


def test_save_then_load_round_trips_exactly_and_writes_lerobot_columns(tmp_path):
    given = np.random.default_rng(1).normal(size=(12, 10)).astype(np.float32)
    path = save_trajectory(tmp_path / "episode.parquet", given, fps=10, episode_index=4, task_index=2)
    assert np.array_equal(load_trajectory(path), given)  # float32 values kept exactly
    assert np.array_equal(load_trajectory(str(path), episode=4), given)
    table = pq.read_table(path)
    assert table.schema.field("action").type == pa.list_(pa.float32(), 10)
    assert np.allclose(table.column("timestamp").to_numpy(), np.arange(12) / 10)
    assert table.column("frame_index").to_pylist() == list(range(12)) == table.column("index").to_pylist()
    assert set(table.column("episode_index").to_pylist()) == {4} and set(table.column("task_index").to_pylist()) == {2}
    assert load_trajectory(path, field="timestamp").shape == (12, 1)
    with pytest.raises(OutputExistsError):
        save_trajectory(path, given, fps=10)  # nothing is silently overwritten
    save_trajectory(path, given[:3], fps=10, overwrite=True)
    assert load_trajectory(path).shape == (3, 10)


def test_the_writer_needs_the_frame_rate_and_a_table(tmp_path):
    for fps in (None, 0, float("nan")):
        with pytest.raises(ValidationError) as caught:
            save_trajectory(tmp_path / "a.parquet", np.zeros((4, 9)), fps=fps)
        assert caught.value.field == "fps" and "fps=" in str(caught.value)
    with pytest.raises(ValidationError) as caught:
        save_trajectory(tmp_path / "a.parquet", np.zeros(4), fps=10)
    assert caught.value.field == "actions"
    assert not (tmp_path / "a.parquet").exists()


def test_the_writer_matches_the_real_lerobot_info_json(tmp_path):
    """Every column we write is a feature of the real ``info.json`` with the Arrow type LeRobot gives it, and we
    write every per-frame bookkeeping column LeRobot adds to each dataset."""
    defaults = FIXTURE["default_features"]["features"]
    for key, feature in defaults.items():  # the real file has them all, typed as lerobot's DEFAULT_FEATURES
        assert {k: FIXTURE["info"]["features"][key][k] for k in feature} == feature, key
    dim = FEATURES["action"]["shape"][0]
    path = save_trajectory(tmp_path / "file-000.parquet", np.zeros((5, dim), np.float32), fps=FPS)
    schema = pq.read_schema(path)
    assert set(defaults) | {"action"} == set(schema.names) <= set(FEATURES)
    for name in schema.names:
        assert schema.field(name).type == arrow_type(FEATURES[name]), name


# ---------------------------------------------------------------------------------------------- LeRobot's files


def test_reads_a_chunked_v30_file_by_episode_in_frame_order(tmp_path):
    table, episodes = lerobot_table({0: 7, 1: 5, 2: 9})
    assert table.column("frame_index").to_pylist() != sorted(table.column("frame_index").to_pylist())
    path = write(table, tmp_path / "data/chunk-000/file-000.parquet")
    for episode, values in episodes.items():
        assert np.array_equal(load_trajectory(path, episode=episode), values["action"])
        state = load_trajectory(path, field="observation.state", episode=episode)
        assert state.dtype == np.float32 and np.array_equal(state, values["observation.state"])
    with pytest.raises(ValidationError) as caught:
        load_trajectory(path)  # three episodes: joining them would make a path that jumps
    assert caught.value.field == "episode" and "0, 1, 2" in str(caught.value) and "episode=" in str(caught.value)
    with pytest.raises(ValidationError) as caught:
        load_trajectory(path, episode=7)
    assert caught.value.field == "episode" and "no episode 7" in str(caught.value)


def test_reads_a_v21_one_episode_file_and_plain_list_columns(tmp_path):
    table, episodes = lerobot_table({2: 6}, seed=3)
    path = write(table, tmp_path / "data/chunk-000/episode_000002.parquet")
    assert np.array_equal(load_trajectory(path), episodes[2]["action"])
    # other writers (pandas, older tools) store a variable-length list<double>; the values are the same
    plain = table.set_column(table.column_names.index("action"), "action",
                             pa.array(table.column("action").to_pylist(), type=pa.list_(pa.float64())))
    path = write(plain.drop_columns(["episode_index"]), tmp_path / "plain.parquet")
    assert np.array_equal(load_trajectory(path), episodes[2]["action"])


def test_a_wrong_field_names_the_field_and_lists_the_columns(tmp_path):
    path = write(lerobot_table({0: 4})[0], tmp_path / "file-000.parquet")
    with pytest.raises(ValidationError) as caught:
        load_trajectory(path, field="observation.velocity")
    message = str(caught.value)
    assert caught.value.field == "observation.velocity" and "'observation.velocity'" in message
    assert all(repr(column) in message for column in FEATURES), message
    assert "field=" in message


def test_bad_parquet_content_is_refused_with_the_reason(tmp_path):
    ragged = pa.table({"action": pa.array([[1.0, 2.0], [3.0]]), "frame_index": pa.array([0, 1])})
    with pytest.raises(ValidationError, match="different lengths"):
        load_trajectory(write(ragged, tmp_path / "ragged.parquet"))
    words = pa.table({"action": pa.array(["a", "b"])})
    with pytest.raises(ValidationError, match="not numbers"):
        load_trajectory(write(words, tmp_path / "words.parquet"))
    repeated = pa.table({"action": pa.array([[1.0], [2.0]]), "frame_index": pa.array([0, 0])})
    with pytest.raises(ValidationError, match="repeats frame_index"):
        load_trajectory(write(repeated, tmp_path / "repeated.parquet"))
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(ValidationError, match="not a readable parquet"):
        load_trajectory(tmp_path / "junk.parquet")
    with pytest.raises(ValidationError) as caught:
        load_trajectory(tmp_path / "missing.parquet")
    assert caught.value.field == "actions" and "does not exist" in str(caught.value)


def test_episode_is_refused_for_files_with_one_trajectory(tmp_path):
    save_trajectory(tmp_path / "a.json", np.zeros((4, 9)))
    with pytest.raises(ValidationError) as caught:
        load_trajectory(tmp_path / "a.json", episode=1)
    assert caught.value.field == "episode"


# ---------------------------------------------------------------------------------------------- without pyarrow


def test_without_pyarrow_parquet_gives_the_install_fix(tmp_path, monkeypatch):
    path = save_trajectory(tmp_path / "a.parquet", np.ones((4, 9), np.float32), fps=10)
    for name in ("pyarrow", "pyarrow.parquet", "pyarrow.compute"):
        monkeypatch.setitem(sys.modules, name, None)  # `import pyarrow` now raises ImportError
    with pytest.raises(ValidationError) as caught:
        load_trajectory(path)
    message = str(caught.value)
    assert caught.value.field == "actions" and "needs pyarrow, which is not installed" in message
    assert "pip install pyarrow" in message and "cosmos-helpers[lerobot]" in message
    with pytest.raises(ValidationError) as caught:
        load_trajectory(path, field="observation.state")
    assert caught.value.field == "observation.state"
    with pytest.raises(ValidationError, match="pip install pyarrow"):
        save_trajectory(tmp_path / "b.parquet", np.ones((4, 9)), fps=10)
    assert not (tmp_path / "b.parquet").exists()
    assert np.array_equal(load_trajectory(save_trajectory(tmp_path / "a.json", np.ones((4, 9)))), np.ones((4, 9)))
