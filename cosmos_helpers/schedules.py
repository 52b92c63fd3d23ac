"""Noise schedules: the flow-matching scheduler each call gets, and a plot of what ``flow_shift`` does.

A larger shift keeps the sampler at high noise for longer (composition and motion are decided there), which
is why Cosmos3 video uses 10 and images 3. Two fixes to diffusers' stock behaviour live here, once:

* the published scheduler config uses Karras sigmas, under which ``flow_shift`` silently does nothing: turned off;
* at high step counts with a large shift, neighbouring timesteps round to the same integer and diffusers'
  schedulers then start one step late and crash on the last one (``assert self.this_order > 0`` at 200 steps,
  shift 10); every pipeline here starts at the first timestep, so the schedulers are told so.
"""

from __future__ import annotations

import inspect
from functools import lru_cache
from typing import Any, Iterable

import numpy as np

from .errors import ValidationError
from .models.tiny import SCHEDULER_CONFIG

NUM_TRAIN_TIMESTEPS = 1000


def configure_scheduler(base_config: Any, scheduler: Any, shift: float, *, shift_given: bool = True):
    """A fresh flow-matching scheduler with ``shift`` (Karras sigmas off) that starts at its first timestep, from a
    diffusers scheduler class (configured from ``base_config``), ``None`` (flow UniPC), or an instance: its settings
    are the user's, its shift kept unless ``shift_given``; a disagreement, or Karras sigmas, is refused."""
    from diffusers import UniPCMultistepScheduler

    instance = not (scheduler is None or isinstance(scheduler, type))
    if instance:  # what its builder left at the class default (diffusers lists it) is not a choice of theirs
        defaulted = set(scheduler.config.get("_use_default_values") or ())
        cls, config = type(scheduler), {k: v for k, v in scheduler.config.items() if k not in defaulted}
    else:
        cls, config = scheduler or UniPCMultistepScheduler, dict(base_config)
    accepted = set(inspect.signature(cls.__init__).parameters)
    # diffusers' from_config resets the keys listed in _use_default_values, which would undo what is set here
    config = {key: value for key, value in config.items()
              if (key in accepted or key.startswith("_")) and key != "_use_default_values"}
    key = "flow_shift" if "flow_shift" in accepted else "shift" if "shift" in accepted else None
    if key is None:
        raise ValidationError("scheduler", f"{cls.__name__} has no flow shift setting.",
                              "use a flow-matching scheduler (UniPCMultistepScheduler, "
                              "FlowMatchEulerDiscreteScheduler, ...).")
    if instance:
        shift = _instance_shift(cls.__name__, config, key, shift, shift_given)
    config[key] = shift
    if key == "flow_shift":
        config.update(use_flow_sigmas=True, prediction_type="flow_prediction")
    if "use_karras_sigmas" in accepted:
        config["use_karras_sigmas"] = False
    return _from_first_timestep(cls).from_config(config)


def _instance_shift(name: str, config: dict, key: str, shift: float, shift_given: bool) -> float:
    """The shift of a scheduler instance the user built: its own, or the request's when only that is set."""
    if config.get("use_karras_sigmas"):
        raise ValidationError("scheduler", f"this {name} uses Karras sigmas, under which the flow shift does "
                              "nothing.", f"build it with use_karras_sigmas=False ({key} is then honoured).")
    own = config.get(key)
    if own is None or float(own) == float(shift):
        return shift
    if shift_given:
        raise ValidationError("flow_shift", f"the request asks for {shift:g} and the scheduler instance was built "
                              f"with {key}={own:g}.", f"drop flow_shift= (the scheduler's {own:g} is used), or build "
                              "the scheduler with the same shift.")
    return float(own)


@lru_cache(maxsize=None)
def _from_first_timestep(cls: type) -> type:
    """``cls`` whose ``set_timesteps`` also sets the begin index to 0 (see the module docstring)."""
    if not hasattr(cls, "set_begin_index"):
        return cls

    def set_timesteps(self, *args, **kwargs):
        result = cls.set_timesteps(self, *args, **kwargs)
        self.set_begin_index(0)
        return result

    return type(cls.__name__, (cls,), {"set_timesteps": set_timesteps, "__module__": cls.__module__,
                                      "__doc__": cls.__doc__})


@lru_cache(maxsize=None)
def _native_class():
    from diffusers import UniPCMultistepScheduler

    class NativeFlowUniPCScheduler(UniPCMultistepScheduler):
        """Flow UniPC with the Cosmos Framework's native schedule: ``set_timesteps(N)`` defaults ``sigmas``."""

        def set_timesteps(self, num_inference_steps=None, device=None, sigmas=None, mu=None):
            if sigmas is None and num_inference_steps is not None:  # the native sigmas, before the shift
                sigmas = np.linspace(1.0 - 1.0 / NUM_TRAIN_TIMESTEPS, 0.0, int(num_inference_steps) + 1)[:-1]
            return super().set_timesteps(num_inference_steps, device=device, sigmas=sigmas, mu=mu)

    return NativeFlowUniPCScheduler


def native_flow_scheduler(base_config: Any, shift: float):
    """The framework's sampler: native-schedule flow UniPC (order 2, bh2, predict-x0, final sigma 0) with ``shift``."""
    config = dict(base_config, solver_order=2, solver_type="bh2", predict_x0=True, lower_order_final=True,
                  final_sigmas_type="zero", num_train_timesteps=NUM_TRAIN_TIMESTEPS)
    return configure_scheduler(config, _native_class(), shift)


def timesteps_for(scheduler: Any, steps: int, shift: float) -> np.ndarray:
    """The timesteps a flow-matching scheduler class (or instance) visits for ``steps`` at ``shift``."""
    configured = configure_scheduler(SCHEDULER_CONFIG, scheduler, shift)
    configured.set_timesteps(steps)
    return configured.timesteps.detach().cpu().numpy().astype(np.float64)


def plot_schedules(curves: Iterable[tuple[str, Any, float]], steps: int = 35):
    """Plot one timestep curve per ``(label, scheduler, shift)``; returns the matplotlib Figure."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.2), dpi=100)
    for label, scheduler, shift in curves:
        ax.plot(timesteps_for(scheduler, steps, shift), marker="o", markersize=3, label=label)  # x: the step index
    ax.set(xlabel="denoising step", ylabel="timestep (1000 = pure noise)", title=f"Where {steps} steps are spent")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    plt.close(fig)  # shown once, as the cell's result, not again by the inline backend
    return fig
