"""The README's per-backend defaults table, generated from the protocol facts (a test keeps the README in step):
a row per setting a request may leave to the backend (sampling: per mode), a cell per backend's answer."""

from __future__ import annotations

from . import diffusers, framework, step_cache, vllm_omni

_HEADER = ("| setting left out of the request | Diffusers (in process) | vLLM-Omni server | Cosmos Framework |\n"
           "| --- | --- | --- | --- |")


def _sampling(steps: int, guidance: float, shift: float) -> str:
    return f"{steps} steps, guidance {guidance:g}, shift {shift:g}"


def defaults_table() -> str:
    image, video = vllm_omni.IMAGE_DEFAULTS, vllm_omni.VIDEO_DEFAULTS
    t2i, t2v = framework.MODE_DEFAULTS["text2image"], framework.MODE_DEFAULTS["text2video"]
    nano = framework.MODEL_CONFIGS["Cosmos3-Nano"]
    call, left = diffusers.CALL_DEFAULTS, diffusers.LEFT_OUT
    sea, fsea = step_cache.DIFFUSERS_DEFAULTS, step_cache.FRAMEWORK_DEFAULTS
    interval = "CFG only for t in [{:g}, {:g}]".format(*image["guidance_interval"])
    rows = [
        ("`use_system_prompt`",
         "the checkpoint config's `default_use_system_prompt` (tiny: on)",
         "off; on for video2video; transfer always uses its own transfer system prompt",
         f"the model config's (Nano/Super/Edge: {'on' if nano['use_system_prompt'] else 'off'})"),
        ("`negative_prompt`", "empty", "empty",
         f"text2image: empty; video modes: the framework's `{framework.NEGATIVE_PROMPT_FILE}` caption"),
        ("sentence templates (plain-text prompts)",
         "on" if call["add_resolution_template"] and call["add_duration_template"] else "off",
         "off (`use_*_template` false; transfer: on)",
         "on (the framework's template strings)"),
        ("JSON caption's duration / fps / resolution / aspect",
         "not added (the templates are skipped for a JSON caption); this project injects them before the call",
         "injected into the JSON object by the server", "injected into the JSON object"),
        ("`guidance_interval`", "none: guidance on every step",
         f"text2image: {interval}; video: none; transfer: not applied", "none"),
        ("text2image steps / guidance / shift",
         f"{left['num_inference_steps']} steps, guidance {left['guidance_scale']:g}, the checkpoint scheduler's "
         "shift (the pipeline has no per-mode defaults)",
         _sampling(image["num_inference_steps"], image["guidance_scale"], image["flow_shift"])
         + f", {image['width']}x{image['height']}",
         _sampling(t2i["num_steps"], t2i["guidance"], t2i["shift"]) + f", aspect {t2i['aspect_ratio']}"),
        ("video steps / guidance / shift",
         f"{left['num_inference_steps']} steps, guidance {left['guidance_scale']:g}, the checkpoint scheduler's "
         "shift",
         _sampling(video["num_inference_steps"], video["guidance_scale"], video["flow_shift"])
         + f", {video['width']}x{video['height']}",
         _sampling(t2v["num_steps"], t2v["guidance"], t2v["shift"]) + f", {t2v['num_frames']} frames at "
         f"{t2v['fps']} fps, {nano['resolution']}p {t2v['aspect_ratio']}"),
        ("`num_frames` (video)",
         f"{left['num_frames']} at {left['width']}x{left['height']} (the pipeline fills in frames and size left out)",
         "1 (a one-frame video: always send it)",
         f"{t2v['num_frames']} (Edge: {framework.MODEL_CONFIGS['Cosmos3-Edge']['num_frames']})"),
        ("`step_cache`",
         f"off (`SeaCache()`: threshold {sea['threshold']:g}, at most {sea['max_consecutive']} passes skipped in a "
         "row)",
         f"the server's `{step_cache.VLLM_CACHE_BACKEND_FLAG}`, set when it starts (vLLM-Omni's default: none, so "
         "off); a request cannot change it",
         f"on: SeaCache, threshold {fsea['threshold']:g}, residual order {fsea['residual_order']}, no limit on skips "
         f"in a row (`{step_cache.FRAMEWORK_OFF_FLAG}` turns it off)"),
    ]
    return "\n".join([_HEADER, *("| " + " | ".join(row) + " |" for row in rows)])


if __name__ == "__main__":  # pragma: no cover
    print(defaults_table())
