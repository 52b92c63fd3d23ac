"""A short run of benchmarks/load_test.py in CI: 12 mixed requests from 4 clients against the tiny server
(subprocess, ``--max-queue 2``). Asserts the invariants (every request answered or rejected with 429 +
Retry-After, none lost, no job left behind, memory bounded), not the timings."""

from __future__ import annotations

import pytest

from cosmos_helpers.standins.vllm_omni.local import LocalServer
from tests.conftest import load_script


def load_module():
    return load_script("benchmarks/load_test.py")


@pytest.mark.slow
def test_load_smoke():
    load_test = load_module()
    server = LocalServer(threads=1, progress=False, ready_timeout=120,
                         extra_args=["--max-queue", "2", "--job-ttl", "120", "--log-level", "warning"])
    with server:
        pid = server.process.pid
        idle = load_test.rss_kib(pid)
        report = load_test.run_load(server.url, pid, requests=12, clients=4, max_queue=2, time_limit=120)
        assert server.running
    print("\n" + report.markdown())
    assert report.lost == 0, [o for o in report.errors]
    assert report.ok + report.rejected == 12 and len(report.outcomes) == 12
    assert report.ok >= 3  # the queue lets work through
    assert all(int(o.retry_after) >= 1 for o in report.outcomes if o.result == "rejected")
    assert report.server_healthy and report.leftover_jobs == 0
    assert report.rss_samples_kib and idle
    assert report.peak_rss_mib < max(3 * idle / 1024, idle / 1024 + 1024)  # bounded: no runaway growth
