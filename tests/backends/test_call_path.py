"""Followed call by call, a request through ``DiffusersBackend.generate`` passes between few modules, and into each
only a few times: the dispatch reads as steps, not as a walk back and forth between modules.

A *pass into* a module is a call into one of its functions from code of another module. Calls that diffusers or
torch make back into ours during denoising (the step callback, the pass-counting hooks) are the loop's, once per step
or per pass, and are counted apart. A frame that calls into the same module again with no call into another module in
between (``with M.Clock(...) as c`` is ``__init__`` then ``__enter__``) makes one pass. ``contextlib`` and
``functools`` wrappers are looked through to the code that uses them.
"""

from __future__ import annotations

import sys
from collections import Counter

from cosmos_helpers import GenerationRequest

PACKAGE = "cosmos_helpers"
LOOKED_THROUGH = {"contextlib", "functools"}
# The resolved request is a value the steps read where they need it (the prompt text, its flags): reads of it are
# counted, and bounded apart.
VALUE_MODULES = {"cosmos_helpers.resolve"}
MAX_PASSES = 2
MAX_VALUE_READS = 4
# Over MAX_PASSES, with why; an entry may only shrink. precision: the request's precision is checked (before any work),
# turned into the call's arguments, and recorded for the manifest, each by a function of the one module that holds
# what every backend does with it.
ALLOWED = {"cosmos_helpers.precision": 3}


def _module(frame) -> str:
    return frame.f_globals.get("__name__", "?")


def _caller(frame):
    caller = frame.f_back
    while caller is not None and _module(caller) in LOOKED_THROUGH:
        caller = caller.f_back
    return caller


def _from_the_loop(caller) -> bool:
    """Whether a call comes (through any of our frames) from library code running the denoising loop."""
    while caller is not None and _module(caller) != __name__:
        if not _module(caller).startswith(PACKAGE) and _module(caller) not in LOOKED_THROUGH:
            return True
        caller = caller.f_back
    return False


def passes_of(call) -> tuple[Counter, Counter]:
    """``(passes into each module on the dispatch path, calls into each module from the denoising loop)``."""
    dispatch, loop, last = Counter(), Counter(), {}

    def profile(frame, event, _arg):
        if event != "call" or not _module(frame).startswith(PACKAGE):
            return
        module, caller = _module(frame), _caller(frame)
        if caller is None or _module(caller) == module:
            return
        if _from_the_loop(caller):
            loop[module] += 1
        elif last.get(caller) != module:
            dispatch[module] += 1
        last[caller] = module

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return dispatch, loop


def test_a_request_passes_into_each_module_at_most_twice(tiny_backend):
    request = GenerationRequest(mode="text2video", prompt="a red ball rolls left", num_inference_steps=2)
    tiny_backend.generate(request)  # loaded: the trace follows the call, not the first load
    dispatch, loop = passes_of(lambda: tiny_backend.generate(request))
    over = {module: n for module, n in dispatch.items()
            if module not in VALUE_MODULES and n > ALLOWED.get(module, MAX_PASSES)}
    assert not over, sorted(dispatch.items(), key=lambda item: -item[1])
    assert all(dispatch[module] > MAX_PASSES for module in ALLOWED), "an allowance no longer needed: remove it"
    assert sum(dispatch[m] for m in VALUE_MODULES) <= MAX_VALUE_READS, dispatch
    assert dispatch["cosmos_helpers.backends.diffusers.backend"] >= 1 and loop, (dispatch, loop)
