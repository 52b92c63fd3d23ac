"""One rank of a multi-GPU Diffusers plan (``python -m`` this module, from :class:`~.workers.WorkerGroup`): it dies with
its parent, joins ``torch.distributed`` (NCCL on CUDA, gloo on CPU), installs the fast path (when asked) and the plan
around it, and runs every request it is sent; rank 0 reports steps and returns the Generation.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import replace
from datetime import timedelta
from multiprocessing.connection import Client

from ....errors import ValidationError
from ....fast import FastOptions, enable_fast_path, fast_path_stats
from ..backend import DiffusersBackend
from .plan import ParallelPlan
from .workers import ADDRESS_ENV, AUTHKEY_ENV, MULTICAST_OFF


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(3)

    threading.Thread(target=watch, daemon=True, name="parent-watchdog").start()


def join_group(spec: dict, rank: int, world: int):
    """The process group and the plan's subgroups (every rank creates every group, in the same order)."""
    import torch
    import torch.distributed as dist

    cuda = spec["device"] == "cuda"
    if cuda:
        torch.cuda.set_device(rank)
    dist.init_process_group("nccl" if cuda else "gloo", init_method=f"tcp://127.0.0.1:{spec['port']}",
                            rank=rank, world_size=world, timeout=timedelta(seconds=spec["collective_timeout"]))
    plan = ParallelPlan(**spec["plan"])
    mine = {}
    for kind, groups in zip(("ulysses", "cfg"), plan.rank_groups()):
        for ranks in groups:
            group = dist.new_group(ranks) if len(ranks) > 1 else None
            if rank in ranks:
                mine[kind] = (group, ranks)
    return plan, mine


def rank_fast_options(fast, plan):
    """The fast path's options on one rank of ``plan``: a CFG-parallel rank sees one branch per step (nothing to
    batch), a Ulysses rank exchanges tokens inside every layer (no CUDA graph of the whole pass). An explicit
    ``True`` for either is refused by ``DiffusersBackend``, so only unset options are decided here."""
    if not fast or not plan.parallel:
        return fast
    options = fast if isinstance(fast, FastOptions) else FastOptions()
    return replace(options, batch_cfg=False, cuda_graphs=False if plan.ulysses > 1 else options.cuda_graphs)


def install_plan(pipe, plan, groups: dict, rank: int, fast=None):
    """``fast`` and then the plan on ``pipe`` (the plan wraps the fast path, the Ulysses seams sit inside the
    transformer); returns the CFG-parallel forward or ``None``."""
    from .cfg import CfgParallelForward
    from .ulysses import install_ulysses

    plan.check_model(pipe.transformer.config)
    if fast:  # first, so that the plan wraps it (the backend's lease then finds it installed)
        enable_fast_path(pipe, fast if isinstance(fast, FastOptions) else None, active=False)
    if plan.ulysses > 1:
        group, ranks = groups["ulysses"]
        pipe._cosmos_ulysses = install_ulysses(pipe.transformer, group, plan.ulysses, ranks.index(rank))
    state = None
    if plan.cfg_parallel > 1:
        group, ranks = groups["cfg"]
        state = CfgParallelForward(pipe, group, ranks.index(rank))
    pipe._cosmos_parallel = state
    return state


def _serve(conn, spec: dict, rank: int, world: int) -> None:
    import torch

    plan, groups = join_group(spec, rank, world)
    cuda = spec["device"] == "cuda"
    backend = DiffusersBackend(  # one GPU, loading (or building) what the parent's would
        device=f"cuda:{rank}" if cuda else "cpu", dtype=spec["dtype"], progress=False,
        fast=rank_fast_options(spec["fast"], plan), scheduler=spec.get("scheduler"), token=spec.get("token"),
        builder=spec.get("builder"), **spec["memory_kwargs"])
    conn.send(("ready", rank, None))
    while True:
        message = conn.recv()
        if message[0] == "stop":
            return
        request = message[1]
        try:
            pipe = backend._loaded(request.model).pipe
            if not hasattr(pipe, "_cosmos_parallel"):  # the plan, installed once per pipeline
                install_plan(pipe, plan, groups, rank, backend.fast)
            state = pipe._cosmos_parallel
            if state is not None:
                state.reset()
            progress = (lambda step, total: conn.send(("step", rank, (step, total)))) if rank == 0 else None
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            generation = backend.generate(request, progress=progress)
            generation.provenance["parallel"] = plan.serve_kwargs()
            if cuda:  # this rank's peak (every rank holds the same weights and shapes)
                generation.provenance["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
            if state is not None:
                generation.provenance["cfg_parallel_stats"] = dict(state.stats)
            if backend.fast:  # whether the fast path ran inside the plan, or fell back to stock (Ulysses)
                stats = fast_path_stats(pipe)
                generation.provenance["fast_stats"] = {k: stats.get(k) for k in ("calls", "stock_fallbacks",
                                                                                  "text_tower_runs")}
            conn.send(("done", rank, generation if rank == 0 else None))
        except ValidationError as exc:
            conn.send(("invalid", rank, (exc.field, exc.problem, exc.fix)))
        except Exception:  # noqa: BLE001 - reported to the parent, which raises it with this rank's traceback
            conn.send(("error", rank, traceback.format_exc()))


def main() -> int:
    rank, world, parent = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["COSMOS_PARENT_PID"])
    _die_with_parent(parent)
    host, port = os.environ[ADDRESS_ENV].rsplit(":", 1)
    conn = Client((host, int(port)), authkey=bytes.fromhex(os.environ.pop(AUTHKEY_ENV)))
    conn.send(("hello", rank, {"pid": os.getpid(), "env": {k: os.environ.get(k) for k in MULTICAST_OFF}}))
    try:
        message = conn.recv()
        if message[0] != "setup":
            return 0
        _serve(conn, message[1], rank, world)
    except EOFError:  # the parent closed the connection: it is gone or stopping us
        return 0
    except Exception:  # noqa: BLE001 - start-up failures go to the parent too
        with contextlib.suppress(OSError):
            conn.send(("error", rank, traceback.format_exc()))
        return 1
    finally:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
