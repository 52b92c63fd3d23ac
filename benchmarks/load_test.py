"""A bounded load test of the local vLLM-Omni-compatible server on loopback.

Mixed requests (images, synchronous videos, asynchronous jobs polled, downloaded and deleted) from N
concurrent clients against ``cosmos-helpers serve`` on the tiny model with a small ``--max-queue``. Every
request must end *answered* (200 with a decodable body) or *rejected* with 429 + ``Retry-After``; nothing
lost (no transport error, no 5xx, no job that vanished). The server's resident memory is sampled from
``/proc/<pid>/status`` (VmRSS) throughout. Bounded in count (``--requests``) and in time (``--time-limit``).

    python benchmarks/load_test.py                       # 50 requests, 8 clients, --max-queue 4
    python benchmarks/load_test.py --requests 200 --clients 16 --max-queue 8

The figures are printed as markdown (see benchmarks/RELIABILITY.md). ``tests/server/test_load_smoke.py``
runs a 12-request version in CI and asserts the invariants, not the timings.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KINDS = ("image", "sync_video", "async_job")
VIDEO_FORM = {"prompt": "a small robot crosses a workshop", "size": "32x32", "num_frames": "5", "fps": "8",
              "num_inference_steps": "2", "extra_params": json.dumps({"guardrails": False})}
IMAGE_BODY = {"prompt": "a robot workshop", "size": "32x32", "num_inference_steps": 2}


@dataclass
class Outcome:
    index: int
    kind: str
    result: str  # "ok" | "rejected" | "error"
    status: int | None
    seconds: float
    detail: str = ""
    retry_after: str | None = None
    rejections: int = 0  # 429 answers seen (retried ones included)


@dataclass
class LoadReport:
    requests: int
    clients: int
    max_queue: int | None
    wall_s: float
    outcomes: list[Outcome]
    rss_samples_kib: list[int] = field(default_factory=list)
    leftover_jobs: int = 0
    server_healthy: bool = True
    retries: int = 0

    def count(self, result: str, kind: str | None = None) -> int:
        return sum(1 for o in self.outcomes if o.result == result and (kind is None or o.kind == kind))

    @property
    def ok(self) -> int:
        return self.count("ok")

    @property
    def rejected(self) -> int:
        return self.count("rejected")

    @property
    def errors(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.result == "error"]

    @property
    def lost(self) -> int:
        """Requests never sent or never answered (the deadline hit first) plus errors."""
        return self.requests - self.ok - self.rejected

    @property
    def peak_rss_mib(self) -> float:
        return max(self.rss_samples_kib, default=0) / 1024

    def latency(self, kind: str | None = None, q: float = 0.5) -> float | None:
        values = sorted(o.seconds for o in self.outcomes if o.result == "ok" and (kind is None or o.kind == kind))
        if not values:
            return None
        position = q * (len(values) - 1)
        low = int(position)
        high = min(low + 1, len(values) - 1)
        return values[low] + (values[high] - values[low]) * (position - low)

    def markdown(self) -> str:
        def fmt(value: float | None) -> str:
            return "–" if value is None else f"{value:.2f}"

        rss = self.rss_samples_kib
        lines = [
            f"{self.requests} requests from {self.clients} clients, --max-queue {self.max_queue}, "
            f"up to {self.retries} retries after Retry-After, wall {self.wall_s:.1f} s, "
            f"{sum(o.rejections for o in self.outcomes)} 429 answers in all",
            "",
            "| answered (200) | rejected (429) | lost / errors | throughput (answered/s) | p50 s | p95 s "
            "| server RSS start → peak → end (MiB) |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | --- |",
            f"| {self.ok} | {self.rejected} | {self.lost} | {self.ok / self.wall_s:.2f} | {fmt(self.latency())} "
            f"| {fmt(self.latency(q=0.95))} | {rss[0] / 1024 if rss else 0:.0f} → {self.peak_rss_mib:.0f} → "
            f"{rss[-1] / 1024 if rss else 0:.0f} |",
            "",
            "| kind | sent | answered | 429 | p50 s | p95 s |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for kind in KINDS:
            sent = sum(1 for o in self.outcomes if o.kind == kind)
            lines.append(f"| {kind} | {sent} | {self.count('ok', kind)} | {self.count('rejected', kind)} "
                         f"| {fmt(self.latency(kind))} | {fmt(self.latency(kind, 0.95))} |")
        return "\n".join(lines)


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _one_with_retries(http: Any, index: int, kind: str, deadline: float, retries: int) -> Outcome:
    """Honour ``Retry-After`` up to ``retries`` times (never past the deadline); latency spans all tries."""
    started = time.perf_counter()
    seen = 0
    while True:
        outcome = _one(http, index, kind, deadline)
        if outcome.result == "rejected":
            seen += 1
            wait = float(outcome.retry_after or 1)
            if seen <= retries and time.monotonic() + wait < deadline:
                time.sleep(wait)
                continue
        outcome.rejections = seen
        outcome.seconds = time.perf_counter() - started
        return outcome


def _one(http: Any, index: int, kind: str, deadline: float) -> Outcome:
    import httpx

    started = time.perf_counter()

    def done(result: str, status: int | None, detail: str = "", retry_after: str | None = None) -> Outcome:
        return Outcome(index, kind, result, status, time.perf_counter() - started, detail, retry_after)

    def rejected_or_error(response: httpx.Response) -> Outcome:
        if response.status_code == 429:
            retry = response.headers.get("retry-after")
            well_formed = retry is not None and retry.isdigit() and response.json()["error"]["code"] == 429
            return done("rejected" if well_formed else "error", 429, "" if well_formed else "bad 429", retry)
        return done("error", response.status_code, response.text[:200])

    try:
        if kind == "image":
            response = http.post("/v1/images/generations", json={**IMAGE_BODY, "seed": index})
            if response.status_code != 200:
                return rejected_or_error(response)
            return done("ok" if response.json()["data"][0]["b64_json"] else "error", 200)
        form = [(k, (None, v)) for k, v in {**VIDEO_FORM, "seed": str(index)}.items()]
        if kind == "sync_video":
            response = http.post("/v1/videos/sync", files=form)
            if response.status_code != 200:
                return rejected_or_error(response)
            ok = response.headers.get("content-type") == "video/mp4" and len(response.content) > 0
            return done("ok" if ok else "error", 200, "" if ok else "empty or not MP4")
        response = http.post("/v1/videos", files=form)
        if response.status_code != 200:
            return rejected_or_error(response)
        job_id = response.json()["id"]
        while True:
            state = http.get(f"/v1/videos/{job_id}")
            status = state.json().get("status") if state.status_code in (200, 400, 500) else None
            if status == "completed":
                break
            if state.status_code == 404 or status == "failed":
                return done("error", state.status_code, f"job {job_id} lost or failed: {state.text[:200]}")
            if time.monotonic() > deadline:
                return done("error", None, f"job {job_id} unfinished at the deadline")
            time.sleep(0.05)
        content = http.get(f"/v1/videos/{job_id}/content")
        http.delete(f"/v1/videos/{job_id}")
        ok = content.status_code == 200 and len(content.content) > 0
        return done("ok" if ok else "error", content.status_code, "" if ok else "no content")
    except httpx.HTTPError as exc:
        return done("error", None, f"{type(exc).__name__}: {exc}")


def run_load(url: str, pid: int | None, *, requests: int = 50, clients: int = 8, max_queue: int | None = None,
             time_limit: float = 300.0, request_timeout: float = 120.0, api_key: str | None = None,
             retries: int = 0) -> LoadReport:
    """Send ``requests`` mixed requests from ``clients`` threads; sample the server's RSS; bounded by time."""
    import httpx

    deadline = time.monotonic() + time_limit
    samples: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            value = rss_kib(pid) if pid else None
            if value is not None:
                samples.append(value)
            stop.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    local = threading.local()
    outcomes: list[Outcome] = []

    def task(index: int) -> None:
        if time.monotonic() > deadline:
            return  # counted as lost: the time bound hit first
        if not hasattr(local, "http"):
            local.http = httpx.Client(base_url=url, timeout=request_timeout, headers=headers)
        outcomes.append(_one_with_retries(local.http, index, KINDS[index % len(KINDS)], deadline, retries))

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients, thread_name_prefix="load-client") as pool:
        list(pool.map(task, range(requests)))
    wall = time.perf_counter() - started
    stop.set()
    sampler.join(2)
    with httpx.Client(base_url=url, timeout=10, headers=headers) as http:
        healthy = http.get("/health").status_code == 200
        leftover = len(http.get("/v1/videos", params={"limit": 100}).json()["data"])
    return LoadReport(requests, clients, max_queue, wall, sorted(outcomes, key=lambda o: o.index), samples,
                      leftover, healthy, retries)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--max-queue", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1, help="torch threads in the server")
    parser.add_argument("--retries", type=int, default=0, help="retries of a 429 after its Retry-After (default 0)")
    parser.add_argument("--time-limit", type=float, default=600.0, help="seconds for the whole run")
    parser.add_argument("--json", type=Path, default=None, help="also write the outcomes as JSON here")
    args = parser.parse_args(argv)

    from cosmos_helpers.standins.vllm_omni.local import LocalServer

    server = LocalServer(threads=args.threads, progress=False, ready_timeout=300,
                         extra_args=["--max-queue", str(args.max_queue), "--job-ttl", "600", "--log-level", "warning"])
    with server:
        rss_idle = rss_kib(server.process.pid)
        report = run_load(server.url, server.process.pid, requests=args.requests, clients=args.clients,
                          max_queue=args.max_queue, time_limit=args.time_limit, retries=args.retries)
    print(report.markdown())
    print(f"\nidle RSS before the run: {rss_idle / 1024 if rss_idle else 0:.0f} MiB; jobs left on the server: "
          f"{report.leftover_jobs}; healthy after: {report.server_healthy}")
    for outcome in report.errors:
        print(f"error: #{outcome.index} {outcome.kind} {outcome.status} {outcome.detail}")
    if args.json:
        args.json.write_text(json.dumps([o.__dict__ for o in report.outcomes], indent=1))
    return 0 if report.lost == 0 and report.server_healthy else 1


if __name__ == "__main__":
    raise SystemExit(main())
