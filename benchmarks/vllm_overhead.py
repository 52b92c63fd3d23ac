"""What the vLLM-Omni path costs on top of the model: a tiny text2video in-process vs through server + client.

Both sides run the same request on the same loaded pipeline (the server runs in a thread of this
process, so nothing but the HTTP path differs). The server-side overhead is the multipart parse, the
FIFO hand-off, the H.264 (+AAC) encode of the answer; the client's is the form build and the MP4 decode.

    python benchmarks/vllm_overhead.py [--repeats 7] [--threads 1] [--sound]

Prints a small markdown table (medians) and the overhead in ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--sound", action="store_true", help="also generate and carry a soundtrack")
    args = parser.parse_args()
    os.environ.setdefault("COSMOS_HELPERS_NO_PROGRESS", "1")

    import torch

    torch.set_num_threads(args.threads)
    from cosmos_helpers import DiffusersBackend, GenerationRequest
    from cosmos_helpers.backends.vllm_omni import VllmOmniBackend
    from cosmos_helpers.standins.vllm_omni.local import ThreadedServer

    request = GenerationRequest(mode="text2video", prompt="a small robot crosses a workshop", width=160, height=96,
                                num_frames=9, num_inference_steps=args.steps, sound=args.sound, seed=0)
    direct = DiffusersBackend("tiny", progress=False)
    direct.generate(request)  # load + warm up

    def timed(call) -> float:
        started = time.perf_counter()
        call()
        return time.perf_counter() - started

    with ThreadedServer() as server, VllmOmniBackend(server.url, progress=False) as client:
        client.generate(request)  # warm up the HTTP path and the encoder
        in_process, served, server_side = [], [], []
        for _ in range(args.repeats):  # interleaved, so drift in machine load hits both sides alike
            in_process.append(timed(lambda: direct.generate(request)))
            generation = None

            def remote():
                nonlocal generation
                generation = client.generate(request)

            served.append(timed(remote))
            server_side.append(generation.timings.get("inference_s", float("nan")))

    median_direct = statistics.median(in_process)
    median_served = statistics.median(served)
    median_server = statistics.median(server_side)
    overhead_ms = (median_served - median_direct) * 1000
    print(f"\ntiny text2video 160x96, 9 frames, {args.steps} steps{', sound' if args.sound else ''}; "
          f"torch threads {args.threads}; median of {args.repeats}\n")
    print("| path | median ms | min ms | max ms |")
    print("| --- | ---: | ---: | ---: |")
    for name, values in (("DiffusersBackend in-process", in_process),
                         ("VllmOmniBackend -> local server (client wall time)", served),
                         ("  of which server inference + encode (X-Inference-Time-S)", server_side)):
        print(f"| {name} | {statistics.median(values) * 1000:.1f} | {min(values) * 1000:.1f} | "
              f"{max(values) * 1000:.1f} |")
    paired_ms = statistics.median(b - a for a, b in zip(in_process, served)) * 1000
    print(f"\noverhead of the HTTP path: {overhead_ms:.1f} ms (difference of medians), {paired_ms:.1f} ms "
          f"(median of paired differences), {1000 * (min(served) - min(in_process)):.1f} ms (difference of minima)")
    print(f"breakdown of the medians: "
          f"(server-side encode etc. {1000 * (median_server - median_direct):.1f} ms, "
          f"transport + client decode {1000 * (median_served - median_server):.1f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
