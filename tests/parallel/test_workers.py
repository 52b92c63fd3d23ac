"""Worker lifecycle of ``DiffusersBackend(gpus=2)`` on CPU (gloo): start, one call, a crash, a stall, no orphans.

One backend is shared by the first two tests, in order: its first call starts two workers running the fast path
per rank and must give the one-process stock backend's frames (fp32, exact); a stopped (stalled) worker is then
reported after the step timeout and the whole group is gone. On bare groups (no model): killing a worker makes
the next call fail with the rank and exit code (not hang) and leaves no process behind; workers die with a parent
that is killed outright.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("diffusers")

from cosmos_helpers import DiffusersBackend, GenerationRequest  # noqa: E402
from cosmos_helpers.backends.diffusers.parallel import MULTICAST_OFF, ParallelPlan, WorkerError, WorkerGroup  # noqa: E402

REQUEST = GenerationRequest(mode="t2v", prompt="a robot stacks cubes", num_inference_steps=2, guardrails=False)
SPEC = {"device": "cpu", "dtype": "float32", "fast": False, "memory_kwargs": {}}
ROOT = Path(__file__).resolve().parents[2]


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def _wait_gone(pids, seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(_gone(pid) for pid in pids):
            return True
        time.sleep(0.2)
    return False


@pytest.fixture(scope="module")
def backend():
    backend = DiffusersBackend(gpus=2, device="cpu", progress=False, worker_timeout=120, fast=True)
    yield backend
    backend.close()


@pytest.mark.slow
def test_two_workers_match_one_process_and_leave_multicast_off(backend, tiny_backend):
    steps = []
    generation = backend.generate(REQUEST, progress=lambda step, total: steps.append((step, total)))
    reference = tiny_backend.generate(REQUEST)
    np.testing.assert_array_equal(generation.frames, reference.frames)
    assert steps == [(1, 2), (2, 2)]
    assert generation.provenance["parallel"] == {"gpus": 2, "cfg_parallel": 2, "ulysses": 1}
    assert generation.request is REQUEST.resolve()
    # the fast path ran per rank inside the plan, none of it fell back to stock: rank 0 ran step 1's two passes and
    # step 2's conditional one (rank 1 ran step 2's negative pass); the text tower once per prompt
    assert generation.provenance["fast_stats"] == {"calls": 3, "stock_fallbacks": 0, "text_tower_runs": 2}
    group = backend._workers
    assert len(group.pids()) == 2 and group.alive
    for rank in (0, 1):
        assert group.worker_env[rank]["env"] == MULTICAST_OFF


@pytest.mark.slow
def test_the_workers_run_the_backends_own_scheduler(tiny_backend):
    """A scheduler given to the backend reaches every worker (it was dropped: workers ran flow UniPC)."""
    from diffusers import FlowMatchEulerDiscreteScheduler

    euler = DiffusersBackend(gpus=2, device="cpu", progress=False, worker_timeout=120,
                             scheduler=FlowMatchEulerDiscreteScheduler)
    try:
        generation = euler.generate(REQUEST)
    finally:
        euler.close()
    alone = DiffusersBackend(device="cpu", progress=False, scheduler=FlowMatchEulerDiscreteScheduler).generate(REQUEST)
    assert generation.provenance["scheduler"] == "FlowMatchEulerDiscreteScheduler"
    np.testing.assert_array_equal(generation.frames, alone.frames)
    assert not np.array_equal(alone.frames, tiny_backend.generate(REQUEST).frames)


@pytest.mark.slow
def test_a_stalled_worker_times_out_and_no_process_is_left(backend):
    group = backend._workers
    pids = group.pids()
    os.kill(pids[1], signal.SIGSTOP)
    group.step_timeout = 2.0
    with pytest.raises(WorkerError, match=r"no word from ranks \[0, 1\] for 2 s|no word from ranks \[1\]"):
        backend.generate(REQUEST)
    assert _wait_gone(pids)
    assert backend._workers is group and not group.alive  # the next call starts a new group


def test_a_killed_worker_is_a_clear_error_and_no_process_is_left():
    group = WorkerGroup(ParallelPlan.build(2), SPEC).start()
    pids = group.pids()
    os.kill(pids[1], signal.SIGKILL)
    group.procs[1].wait(10)  # it died before the call: the call still says which rank and how
    with pytest.raises(WorkerError, match=r"rank 1 \(pid \d+\) exited with code -9"):
        group.generate(REQUEST)
    assert _wait_gone(pids)
    with pytest.raises(WorkerError, match="not running"):
        group.generate(REQUEST)


def test_workers_die_with_a_killed_parent(tmp_path):
    script = textwrap.dedent("""
        import sys, time
        from cosmos_helpers.backends.diffusers.parallel import ParallelPlan, WorkerGroup
        group = WorkerGroup(ParallelPlan.build(2), {"device": "cpu", "dtype": "float32", "fast": False,
                                                    "memory_kwargs": {}}).start()
        print(*group.pids(), flush=True)
        time.sleep(120)
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and not any(_gone(pid) for pid in pids)
    finally:
        parent.kill()
        parent.wait()
    assert _wait_gone(pids), "workers outlived their parent"
