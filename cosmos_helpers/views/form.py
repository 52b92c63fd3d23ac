"""``GenerateForm``: fill in a request, press Generate, watch the steps, see the result.

The form builds a :class:`GenerationRequest`, so every check the request makes applies; a :class:`ValidationError`
is shown next to the field it names, not as a traceback.
"""

from __future__ import annotations

import html
import inspect
import itertools
import time
import traceback
from pathlib import Path
from typing import Any

from ..display import is_static
from ..errors import CosmosHelpersError, ValidationError
from ..presets import ASPECT_RATIOS, DEFAULT_PROFILE, MODES, TIERS, get_profile
from ..protocol import action
from ..request import IMAGE_MODES, MAX_GUIDANCE, MAX_STEPS, GenerationRequest
from ..step_cache import parse_step_cache
from .viewers import show

INPUT_SIZE = "input"  # the tier of an edit that keeps its input's shape
DEFAULT_PROMPT = ("A small yellow robot rolls across a sunlit wooden workbench, past scattered tools, "
                  "and stops beside a coffee mug. Static camera, soft morning light.")
_FIELDS = ("prompt", "mode", "image", "embodiment", "actions", "tier", "aspect_ratio", "num_frames",
           "num_inference_steps", "guidance_scale", "seed", "sound", "step_cache")
_CACHE_CHOICES = (("backend default", "default"), ("off", "off"), ("SeaCache", "sea"))
_STYLE = {"description_width": "80px"}


class GenerateForm:
    """An interactive form around ``backend.generate(request, progress=callback)`` of any backend.

    ``defaults``: initial request values (``GenerationRequest`` field names); those without a widget (such as
    ``negative_prompt``) go to every request unchanged. ``output_dir``: every result is saved there (MP4/PNG +
    manifest) before it is shown. ``form.generate()`` does what the button does and returns the :class:`Generation`
    (``None`` when the request was invalid or the backend failed); ``form.last`` and ``form.history`` keep them.
    Outside a live kernel (papermill, nbconvert) the form renders as a static note.
    """

    def __init__(self, backend: Any, *, defaults: dict[str, Any] | None = None,
                 output_dir: str | Path | None = None) -> None:
        import ipywidgets as w

        self.backend = backend
        self.output_dir = Path(output_dir) if output_dir is not None else None
        self.defaults = dict(defaults or {})
        self.last = None
        self.history: list = []
        self.last_error: Exception | None = None
        self._counter = itertools.count(1)
        self._fields(w, self.defaults)
        self.button = w.Button(description="Generate", button_style="primary", icon="play",
                               tooltip="build the request, validate it, and run it on the backend")
        self.progress = w.IntProgress(value=0, min=0, max=max(1, self.num_inference_steps.value),
                                      description="denoising", style=_STYLE)
        self.status = w.HTML("")
        self.output = w.Output()
        self.button.on_click(lambda _button: self.generate())
        for widget in (self.mode, self.step_cache, self.tier):
            widget.observe(lambda _change: self._sync_mode(), names="value")
        self._sync_mode()
        self.widget = self._layout(w, backend)

    def _fields(self, w: Any, d: dict[str, Any]) -> None:
        """One widget per request field, filled from ``d`` and then the profile's defaults for the mode."""
        p = get_profile(d.get("profile", DEFAULT_PROFILE)).defaults(d.get("mode", "text2video"))
        v = {"prompt": DEFAULT_PROMPT, "mode": "text2video", "tier": p.tier, "aspect_ratio": p.aspect_ratio,
             "num_frames": p.num_frames, "num_inference_steps": p.num_inference_steps,
             "guidance_scale": p.guidance_scale, "seed": 0, "sound": False, **d}

        def field(kind: str, description: str, value: Any, *, wide: bool = False, **options: Any) -> Any:
            if wide:  # one Layout per widget: hiding one must not hide another
                options["layout"] = w.Layout(width="100%")
            return getattr(w, kind)(value=value, description=description, style=_STYLE, **options)

        self.prompt = field("Textarea", "prompt", str(v["prompt"]), rows=4, wide=True)
        self.mode = field("Dropdown", "mode", v["mode"], options=list(MODES))
        self.image = field("Text", "image / video", str(d.get("image") or d.get("video") or ""), wide=True,
                           placeholder="path of the conditioning image (image2video) or video (video2video)")
        self.tier = field("Dropdown", "tier", str(v["tier"]), options=list(TIERS))
        self.embodiment = field("Dropdown", "embodiment", d.get("embodiment") or "av", options=sorted(action.RAW_DIM))
        self.actions = field("Text", "actions", str(d.get("actions") or ""), wide=True,
                             placeholder="trajectory .json / .npz to play (forward_dynamics)")
        self.aspect_ratio = field("Dropdown", "aspect", v["aspect_ratio"], options=list(ASPECT_RATIOS))
        self.num_frames = field("BoundedIntText", "frames", int(v["num_frames"]), min=1, max=1001, step=4)
        self.num_inference_steps = field("BoundedIntText", "steps", int(v["num_inference_steps"]), min=1, max=MAX_STEPS)
        self.guidance_scale = field("BoundedFloatText", "guidance", float(v["guidance_scale"]), min=0.0,
                                    max=MAX_GUIDANCE, step=0.5)
        self.seed = field("IntText", "seed", int(v["seed"]))
        self.sound = field("Checkbox", "sound (48 kHz stereo)", bool(v["sound"]))
        cache = d.get("step_cache")
        self.step_cache = field("Dropdown", "step cache", "default" if cache is None else "off" if cache == "off"
                                else "sea", options=_CACHE_CHOICES)
        self.cache_threshold = field("Text", "threshold", "" if getattr(cache, "threshold", None) is None
                                     else str(cache.threshold), placeholder="backend's own")

    def _layout(self, w: Any, backend: Any) -> Any:
        """The form's widgets in reading order; ``_sync_mode`` hides the ones the mode does not use."""
        row = lambda *children: w.HBox(list(children), layout=w.Layout(flex_flow="row wrap"))  # noqa: E731
        widget = w.VBox([
            w.HTML(f"<b>Generate with {html.escape(_backend_name(backend))}</b>"),
            self.prompt,
            row(self.mode, self.tier, self.aspect_ratio),
            self.image,
            row(self.embodiment),
            self.actions,
            row(self.num_frames, self.num_inference_steps, self.guidance_scale),
            row(self.seed, self.sound),
            row(self.step_cache, self.cache_threshold),
            row(self.button, self.progress),
            self.status,
            self.output,
        ], layout=w.Layout(width="100%", max_width="900px"))
        widget.add_class("cosmos-helpers-form")
        return widget

    def _sync_mode(self) -> None:
        mode = self.mode.value
        acting = mode in action.MODES
        self.num_frames.disabled = mode in IMAGE_MODES
        self.sound.disabled = mode in IMAGE_MODES or acting
        self.image.layout.display = None if mode in ("image2video", "video2video", "image2image") or acting \
            else "none"
        self.embodiment.layout.display = None if acting else "none"
        self.actions.layout.display = None if mode in action.GIVES_ACTIONS else "none"
        # an edit may keep its input's shape (the framework's default): the tier "input", with no aspect ratio
        tiers = list(action.TIERS) if acting else [INPUT_SIZE, *TIERS] if mode == "image2image" else list(TIERS)
        if list(self.tier.options) != tiers:  # entering an edit starts at "input" (the framework default)
            keep = self.tier.value if self.tier.value in tiers and tiers[0] != INPUT_SIZE else tiers[0]
            self.tier.options, self.tier.value = tiers, keep
        self.aspect_ratio.disabled = acting or self.tier.value == INPUT_SIZE  # a start image's or input's shape
        self.cache_threshold.layout.display = None if self.step_cache.value == "sea" else "none"

    def request(self):
        """The :class:`GenerationRequest` the form describes (raises :class:`ValidationError`)."""
        values = {k: v for k, v in self.defaults.items() if k not in _FIELDS and k != "video"}
        mode = self.mode.value
        values.update(mode=mode, prompt=self.prompt.value, aspect_ratio=self.aspect_ratio.value,
                      num_inference_steps=int(self.num_inference_steps.value),
                      guidance_scale=float(self.guidance_scale.value), seed=int(self.seed.value))
        if self.tier.value == INPUT_SIZE or "width" in values or "height" in values:
            values.pop("aspect_ratio")  # the input's shape, or the given size's
        else:
            values["tier"] = self.tier.value
        if mode not in IMAGE_MODES:
            values["num_frames"] = int(self.num_frames.value)
            values["sound"] = bool(self.sound.value)
        media_path = self.image.value.strip()
        if mode in action.MODES:
            values.pop("aspect_ratio", None)
            values.update(embodiment=self.embodiment.value, sound=False)
            values["video" if mode in action.TAKES_VIDEO else "image"] = media_path or None
            if mode in action.GIVES_ACTIONS:
                values["actions"] = self.actions.value.strip() or None
        elif mode in ("image2video", "image2image", "video2video"):
            values["video" if mode == "video2video" else "image"] = media_path or None
        choice, threshold = self.step_cache.value, self.cache_threshold.value.strip()  # as --step-cache sea:THRESHOLD
        values["step_cache"] = None if choice == "default" else parse_step_cache(
            f"sea:{threshold}" if choice == "sea" and threshold else choice)
        return GenerationRequest(**values)

    def generate(self):
        """Validate, run with a live progress bar, save (with ``output_dir``), show; return the Generation."""
        for name in _FIELDS:  # clear the marks of the last failure
            getattr(self, name).layout.border = None
        self.last_error = None
        try:
            request = self.request().resolve()
        except ValidationError as exc:
            return self._fail(exc)
        self.button.disabled = True
        self.progress.bar_style = ""
        self.progress.max = request.num_inference_steps
        self.progress.value = 0
        self.status.value = f"<span style='color:#555'>running: {html.escape(request.summary())}</span>"
        started = time.perf_counter()
        try:
            generation = self._run(request)
            if self.output_dir is not None:
                stamp = time.strftime("%Y%m%d-%H%M%S")
                stem = self.output_dir / f"form-{request.mode}-seed{request.seed}-{stamp}-{next(self._counter)}"
                generation.save(stem)
        except Exception as exc:  # shown in the form; a bug's traceback goes to the output area too
            if not isinstance(exc, CosmosHelpersError):
                with self.output:
                    print(traceback.format_exc())
            return self._fail(exc)
        finally:
            self.button.disabled = False
        self.progress.value = self.progress.max
        self.progress.bar_style = "success"
        saved = f" &middot; saved {html.escape(str(generation.paths['media']))}" if generation.paths else ""
        self.status.value = f"<span style='color:#1a7f37'>done in {time.perf_counter() - started:.1f} s{saved}</span>"
        self.last = generation
        self.history.append(generation)

        self.output.clear_output(wait=True)
        self.last_view = show(generation, display=False)
        with self.output:
            from IPython.display import display

            display(self.last_view)
        return generation

    def _run(self, request):
        def on_step(step: int, total: int) -> None:
            self.progress.max = max(1, int(total))
            self.progress.value = min(int(step), self.progress.max)
            self.progress.description = f"step {step}/{total}"

        generate = self.backend.generate
        try:
            accepts_progress = "progress" in inspect.signature(generate).parameters
        except (TypeError, ValueError):
            accepts_progress = False
        return generate(request, progress=on_step) if accepts_progress else generate(request)

    def _fail(self, exc: Exception) -> None:
        """Show ``exc`` in the form and mark the field a :class:`ValidationError` names."""
        self.last_error = exc
        self.progress.bar_style = "danger"
        if isinstance(exc, ValidationError):
            fix = f"<br><b>Fix:</b> {html.escape(exc.fix)}" if exc.fix else ""
            text = f"<b>{html.escape(exc.field)}</b>: {html.escape(exc.problem)}{fix}"
            name = {"width": "tier", "height": "tier", "video": "image"}.get(exc.field, exc.field)  # its widget
            if name in _FIELDS:
                getattr(self, name).layout.border = "2px solid #b42318"
        else:
            text = f"<b>{html.escape(type(exc).__name__)}</b>: {html.escape(str(exc))}"
        self.status.value = f"<div style='color:#b42318'>{text}</div>"

    def _repr_mimebundle_(self, include=None, exclude=None):
        if is_static():
            return {"text/html": self.static_html(), "text/plain": repr(self)}
        return self.widget._repr_mimebundle_(include=include, exclude=exclude)

    def __repr__(self) -> str:
        return f"GenerateForm({_backend_name(self.backend)})"

    def static_html(self) -> str:
        """What the form looks like in a saved notebook: its fields and their values, and how to use it."""
        cells = "".join(f"<tr><th style='text-align:left;padding:1px 8px'>{getattr(self, k).description}</th>"
                        f"<td style='padding:1px 8px'>{html.escape(str(getattr(self, k).value))}</td></tr>"
                        for k in _FIELDS if k != "image")
        return ("<div class='cosmos-helpers-form' style='border:1px solid #ccc;border-radius:4px;padding:8px;"
                "max-width:900px;font:13px system-ui,sans-serif'>"
                f"<b>GenerateForm</b> for {html.escape(_backend_name(self.backend))}: an interactive form "
                "(prompt, mode, tier, aspect, frames, steps, guidance, seed, sound, a Generate button with a "
                "progress bar). It is live only in a running Jupyter kernel; open this notebook in JupyterLab "
                f"and run the cell to use it. Initial values:<table>{cells}</table></div>")


def _backend_name(backend: Any) -> str:
    name = getattr(backend, "name", None) or type(backend).__name__
    model = getattr(backend, "model", None)
    return f"{name} ({model})" if model else str(name)
