"""The cookbooks in real JupyterLab + headless Chromium: what a person would see.

For every notebook under ``cookbooks/cosmos3/generator/`` (and a small widgets demo notebook written by
this test, so the checks run even before the cookbooks exist) the test opens it in JupyterLab and asserts what
follows. Two run live, Run > Run All Cells in a kernel the server started, until the kernel is idle (``LIVE``):
the demo, whose every viewer is a live widget and one of whose clips must play sound, and the Diffusers cookbook,
whose ``GenerateForm`` must be clicked and must generate. Every other cookbook is opened as the suite's one
execution of it left it (``tests/cookbooks/runs.py``: ``run-cookbooks``' static outputs, signed as trusted like
output made in the lab), rather than run a second time.

* every code cell ran (no cell left unexecuted by an error): its prompt shows an execution count;
* at least one ``<video>`` rendered and every ``<video>`` reaches a playable state (``readyState >= 2``);
  in the demo, one of them has decodable sound (``webkitAudioDecodedByteCount > 0`` after playing muted);
* a ``GenerateForm`` is visible (demo, and any notebook that calls ``GenerateForm(``); its Generate button is
  clicked and the form must show a finished, playable result;
* no browser console errors beyond the known-benign list in ``conftest.BENIGN_CONSOLE``.

A second test makes the demo's three generations, executes the demo's viewers on them headlessly (static outputs:
``jupyter nbconvert --execute`` must be detected as static), writes the gallery with :func:`write_gallery`, serves
it over ``http.server`` and checks that its players and thumbnails, and the executed notebook's page, load in the
browser.

Screenshots and console logs go to ``$COSMOS_HELPERS_ARTIFACTS`` (default ``.artifacts/browser/``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from cosmos_helpers.notebooks import find_cookbooks

from .conftest import COOKBOOKS, REPO, kernel_env, watch_console

# one pytest-xdist worker drives the one JupyterLab and Chromium and executes the cookbooks (tests/conftest.py)
pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(900), pytest.mark.xdist_group("cookbooks")]

DEMO = "widgets_demo.ipynb"
LIVE = (DEMO, "cookbooks/cosmos3/generator/audiovisual/run_with_diffusers.ipynb")
# Notebooks whose outputs are not videos: what each must show instead.
STILL_OUTPUTS = {"cookbooks/cosmos3/generator/sweeps/seed_and_guidance.ipynb": "image",
                 "cookbooks/cosmos3/generator/prompting/prompts_that_pass.ipynb": "text",
                 "cookbooks/cosmos3/generator/tiny_world/what_the_tiny_model_learned.ipynb": "image"}
RUN_TIMEOUT_S = float(os.environ.get("COSMOS_HELPERS_BROWSER_RUN_TIMEOUT", "420"))

DEMO_CELLS = [
    ("markdown", "# cosmos_helpers widgets demo\nEvery viewer on the embedded tiny model."),
    ("code", "# parameters\nfrom pathlib import Path\nOUT = Path('demo_outputs')\nSTEPS = 2"),
    ("code", "import torch\ntorch.set_num_threads(2)\n"
             "from cosmos_helpers import (DiffusersBackend, GenerationRequest, GenerateForm, compare,\n"
             "                            frame_strip, grid, show, sound_plot)\n"
             "backend = DiffusersBackend()\n"
             "request = GenerationRequest(mode='text2video',\n"
             "                            prompt='A yellow robot rolls across a sunlit workbench.', tier='128',\n"
             "                            num_frames=9, num_inference_steps=STEPS, sound=True, seed=0)\n"
             "video = backend.generate(request)\n"
             "video.save(OUT / 't2v_sound', overwrite=True)\n"
             "show(video)"),
    ("code", "image = backend.generate(request.replace(mode='text2image', num_frames=None, sound=False))\n"
             "image.save(OUT / 't2i', overwrite=True)\nshow(image)"),
    ("code", "other = backend.generate(request.replace(seed=1))\nother.save(OUT / 't2v_sound_seed1', overwrite=True)\n"
             "compare(video, other)"),
    ("code", "compare(video, other, mode='slider')"),
    ("code", "grid([video, other, image])"),
    ("code", "frame_strip(video)"),
    ("code", "sound_plot(video)"),
    ("code", "GenerateForm(backend, defaults={'tier': '128', 'num_frames': 9, 'num_inference_steps': STEPS, "
             "'sound': True})"),
]


# The demo's viewers on the same three generations, made by the test and loaded from their files, for the headless
# run of the gallery test: what a static run shows is what it checks, not how fast the kernel generates.
STATIC_DEMO_CELLS = [
    DEMO_CELLS[0],
    ("code", "# parameters\nfrom pathlib import Path\nOUT = Path('demo_outputs')"),
    ("code", "from cosmos_helpers import (DiffusersBackend, GenerateForm, Generation, compare, frame_strip, grid,\n"
             "                            show, sound_plot)\n"
             "video = Generation.load(OUT / 't2v_sound.mp4')\nshow(video)"),
    ("code", "image = Generation.load(OUT / 't2i.png')\nshow(image)"),
    ("code", "other = Generation.load(OUT / 't2v_sound_seed1.mp4')\ncompare(video, other)"),
    *DEMO_CELLS[5:9],
    ("code", "GenerateForm(DiffusersBackend(), defaults={'tier': '128', 'num_frames': 9, 'sound': True})"),
]


def write_demo(path: Path, cells=DEMO_CELLS) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    for kind, source in cells:
        cell = nbformat.v4.new_markdown_cell(source) if kind == "markdown" else nbformat.v4.new_code_cell(source)
        if source.startswith("# parameters"):
            cell.metadata["tags"] = ["parameters"]
        nb.cells.append(cell)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


def cookbook_notebooks() -> list[str]:
    found = find_cookbooks(REPO) if COOKBOOKS.is_dir() else []
    return [p.relative_to(REPO).as_posix() for p in found]


def _params():
    params = [pytest.param(DEMO, id="widgets_demo")]
    found = cookbook_notebooks()
    if found:
        params += [pytest.param(rel, id=rel.removeprefix("cookbooks/cosmos3/generator/")) for rel in found]
    else:
        params.append(pytest.param(None, id="cookbooks", marks=pytest.mark.skip(
            reason="no notebooks under cookbooks/cosmos3/generator yet")))
    return params


# Browser helpers ----------------------------------------------------------------------------------------------

VIDEO_STATE_JS = """async (video, sound) => {
  const settle = () => new Promise((resolve) => {
    if (video.readyState >= 2) return resolve();
    const done = () => resolve();
    video.addEventListener('canplay', done, {once: true});
    video.addEventListener('loadeddata', done, {once: true});
    video.addEventListener('error', done, {once: true});
    setTimeout(done, 20000);
    if (video.preload === 'none' || video.preload === 'metadata') { video.preload = 'auto'; video.load(); }
  });
  await settle();
  const state = {readyState: video.readyState, error: video.error ? video.error.code : null,
                 width: video.videoWidth, height: video.videoHeight, duration: video.duration,
                 src: (video.currentSrc || '').slice(0, 40)};
  if (video.readyState >= 2) {
    video.muted = true;
    // play 400 ms; a clip whose sound is checked plays on (up to 10 s) until some audio is decoded
    const decoded = () => (video.webkitAudioDecodedByteCount || 0) > 0;
    try {
      await video.play();
      const start = Date.now();
      do { await new Promise(r => setTimeout(r, 100)); }
      while (Date.now() - start < 400 || (sound && !decoded() && !video.ended && Date.now() - start < 10000));
      video.pause();
    }
    catch (e) { state.play_error = String(e); }
    state.audio_bytes = video.webkitAudioDecodedByteCount || 0;
    state.video_bytes = video.webkitVideoDecodedByteCount || 0;
    video.currentTime = 0;
  }
  return state;
}"""


def check_videos(locator, minimum: int = 1, sound: bool = False) -> list[dict]:
    count = locator.count()
    assert count >= minimum, f"expected at least {minimum} <video> element(s), found {count}"
    states = []
    for index in range(count):
        video = locator.nth(index)
        video.scroll_into_view_if_needed()
        state = video.evaluate(VIDEO_STATE_JS, sound)
        states.append(state)
        assert state["readyState"] >= 2 and state["error"] is None, f"video {index} is not playable: {state}"
        assert state["width"] > 0 and state["height"] > 0, state
    return states


def open_notebook(page, lab, relative: str) -> None:
    page.goto(lab.notebook_url(relative), wait_until="domcontentloaded")
    page.locator(".jp-Notebook").first.wait_for(state="visible", timeout=90_000)
    # A notebook without a known kernelspec asks for a kernel (accept the default); one with a known kernelspec has
    # its session started without asking. Whichever comes first.
    accept = page.locator(".jp-Dialog .jp-mod-accept")
    deadline = time.monotonic() + 90
    while not _has_session(lab, relative):
        if accept.count() and accept.first.is_visible():
            accept.first.click()
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{relative}: no kernel session and no kernel dialog after 90 s")
        page.wait_for_timeout(200)
    wait_kernel_idle(lab, relative, timeout=120)


def _has_session(lab, relative: str) -> bool:
    try:
        return bool(sessions(lab, relative))
    except OSError:  # the server answered 500 while a kernel was starting
        return False


def sessions(lab, relative: str) -> list[dict]:
    """The notebook's sessions. Only its own kernel is waited for: another test's kernel that JupyterLab left
    starting (its kernel listing can fail while a kernel starts, on a loaded machine) must not fail this test."""
    with urllib.request.urlopen(f"{lab.url}/api/sessions?token={lab.token}", timeout=5) as response:
        return [s for s in json.load(response) if s.get("path", "").lstrip("/") == relative and s.get("kernel")]


def wait_kernel_idle(lab, relative: str, *, timeout: float, quiet_s: float = 1.5) -> None:
    deadline = time.monotonic() + timeout
    idle_since, states = None, []
    while time.monotonic() < deadline:
        try:
            states = [s["kernel"].get("execution_state") for s in sessions(lab, relative)]
        except OSError as exc:  # the server answered 500 while a kernel was starting: ask again
            states = [f"unanswered: {exc}"]
        if states and all(s == "idle" for s in states):
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since >= quiet_s:
                return
        else:
            idle_since = None
        time.sleep(0.3)
    raise TimeoutError(f"the kernel of {relative} not idle after {timeout} s: {states}")


def shut_down(lab, relative: str) -> None:
    """End the notebook's session (and its kernel), so kernels do not pile up over the session's tests."""
    for session in sessions(lab, relative):
        request = urllib.request.Request(f"{lab.url}/api/sessions/{session['id']}?token={lab.token}", method="DELETE")
        with urllib.request.urlopen(request, timeout=30):
            pass


def run_all_cells(page) -> None:
    page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).first.click()
    page.get_by_role("menuitem", name=re.compile(r"^Run All Cells")).first.click()


def wait_cells_done(page, lab, relative: str, timeout: float) -> None:
    """Until no cell is queued or running (``[*]``) and the kernel has been idle for a moment."""
    deadline = time.monotonic() + timeout
    prompts = page.locator(".jp-CodeCell .jp-InputPrompt")
    page.wait_for_function("() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]"
                           ".some(p => /\\[[*0-9]+\\]/.test(p.textContent))", timeout=60_000)
    while time.monotonic() < deadline:
        texts = prompts.all_text_contents()
        if not any("*" in t for t in texts):
            wait_kernel_idle(lab, relative, timeout=max(5.0, deadline - time.monotonic()))
            if not any("*" in t for t in prompts.all_text_contents()):
                return
        time.sleep(0.5)
    raise TimeoutError(f"cells still running after {timeout} s: {prompts.all_text_contents()}")


def shoot(target, path: Path) -> None:
    try:
        target.screenshot(path=str(path))
    except Exception as exc:  # a screenshot is evidence, not the assertion
        path.with_suffix(".txt").write_text(f"screenshot failed: {exc}")


# Tests ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("relative", _params())
def test_notebook_in_jupyterlab(relative, lab, browser, artifacts, cookbook_runs):
    if relative == DEMO:
        write_demo(lab.root / DEMO)
        source = DEMO_CELLS.__repr__()
    else:
        source = (REPO / relative).read_text()
    live = relative in LIVE
    assert live or "GenerateForm(" not in source, "a form is clicked in a live kernel: add the notebook to LIVE"
    opened = relative  # the notebook's path in the lab
    if not live:
        run = cookbook_runs.get(relative.removeprefix("cookbooks/cosmos3/generator/"))
        assert run.ok, run.error
        opened = lab.add_executed(run)
    name = Path(relative).stem
    shots = artifacts / name
    shots.mkdir(parents=True, exist_ok=True)
    page = browser.new_page()
    console = watch_console(page)
    try:
        open_notebook(page, lab, opened)
        if live:
            run_all_cells(page)
            wait_cells_done(page, lab, opened, RUN_TIMEOUT_S)
        shoot(page, shots / ("01-after-run-all.png" if live else "01-executed.png"))

        prompts = page.locator(".jp-CodeCell .jp-InputPrompt").all_text_contents()
        unexecuted = [i for i, text in enumerate(prompts) if not re.search(r"\[\d+\]", text)]
        errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
        tracebacks = [t for t in errors.all_text_contents() if "Traceback" in t or "Error" in t.split("\n")[0]]
        assert not unexecuted, f"cells {unexecuted} did not run (an earlier cell failed?): {tracebacks[:1]}"

        for index, cell in enumerate(page.locator(".jp-CodeCell:has(.jp-OutputArea-output)").all()[:20]):
            cell.scroll_into_view_if_needed()
            shoot(cell, shots / f"cell-{index:02d}.png")

        # every notebook that previews generations must show playable players; the benchmarks notebook only plots;
        # a notebook that makes only still images must show them, and the prompting one shows text (captions)
        expected = STILL_OUTPUTS.get(relative)
        shows_media = relative == DEMO or any(call in source for call in ("show(", "compare(", "grid("))
        states = check_videos(page.locator(".jp-OutputArea video"),
                              minimum=1 if shows_media and expected is None else 0, sound=relative == DEMO)
        if expected == "text":
            assert page.locator(".jp-OutputArea-output").count() >= 3, "the notebook showed no results"
        elif not shows_media or expected == "image":
            assert page.locator(".jp-OutputArea img").count() >= 1, "the picture or plot did not render"
        if relative == DEMO:
            assert any(s.get("audio_bytes", 0) > 0 for s in states), f"no video had decodable sound: {states}"
            assert page.locator(".jp-OutputArea .cosmos-helpers-slider input[type=range]").count() == 1

        if relative == DEMO or "GenerateForm(" in source:
            form = page.locator(".cosmos-helpers-form").first
            form.scroll_into_view_if_needed()
            assert form.is_visible(), "the GenerateForm did not render"
            button = form.get_by_role("button", name="Generate")
            assert button.is_visible()
            button.click()
            form.get_by_text(re.compile(r"done in [0-9.]+ s")).wait_for(timeout=180_000)
            form.locator("video").first.wait_for(timeout=30_000)
            shoot(form, shots / "form-after-generate.png")
            check_videos(form.locator("video"))
            assert form.locator(".progress-bar-success").count() == 1, "the form's progress bar did not finish"
        wait_kernel_idle(lab, opened, timeout=60, quiet_s=1.5 if live else 0.0)  # an opened copy ran nothing
        assert not console.errors, "browser console errors:\n" + "\n".join(console.errors)
    finally:
        (shots / "console.log").write_text("\n".join(console.all + ["", "ignored (benign):"] + console.ignored))
        page.close()
        with contextlib.suppress(OSError):  # a failure to tidy up must not hide the test's own
            shut_down(lab, opened)


def test_gallery_in_browser(browser, browser_tools, static_server, artifacts, scratch, tiny_backend):
    """The demo's three generations, a headless run of its viewers on them (static outputs), then the gallery and the
    executed notebook page in the browser."""
    from cosmos_helpers import GenerationRequest
    from cosmos_helpers.gallery import write_gallery

    out = scratch / "outputs"
    request = GenerationRequest(mode="text2video", prompt="A yellow robot rolls across a sunlit workbench.", tier="128",
                                num_frames=9, num_inference_steps=2, sound=True, seed=0)
    image = request.replace(mode="text2image", num_frames=None, sound=False)
    for name, item in (("t2v_sound", request), ("t2i", image), ("t2v_sound_seed1", request.replace(seed=1))):
        tiny_backend.generate(item).save(out / "demo_outputs" / name)
    notebook = write_demo(out / DEMO, STATIC_DEMO_CELLS)
    env = kernel_env()  # no COSMOS_HELPERS_STATIC: the nbconvert parent must be detected as static
    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--inplace",
                    "--ExecutePreprocessor.timeout=600", str(notebook)], check=True, env=env, cwd=out,
                   capture_output=True)
    index = write_gallery(out)
    base = static_server(out)
    shots = artifacts / "gallery"
    shots.mkdir(parents=True, exist_ok=True)
    page = browser.new_page()
    console = watch_console(page)
    try:
        page.goto(f"{base}/{index.name}", wait_until="load")
        cards = page.locator(".card")
        assert cards.count() == 3, "t2v + sound, t2i, seed 1"
        check_videos(page.locator(".card video"), minimum=2)
        images = page.locator(".card img")
        assert images.count() == 1
        assert images.first.evaluate("img => img.complete && img.naturalWidth > 0")
        assert page.locator("table.runs tbody tr").count() == 3
        shoot(page, shots / "index.png")
        page.screenshot(path=str(shots / "index-full.png"), full_page=True)

        page.get_by_role("link", name=re.compile(r"widgets_demo\.ipynb")).first.click()
        page.wait_for_load_state("load")
        assert page.url.endswith("widgets_demo.html")
        states = check_videos(page.locator("video"), minimum=3)
        assert all(s["src"].startswith("data:video/mp4") for s in states), "static outputs embed the preview"
        assert page.locator(".cosmos-helpers-slider input[type=range]").count() == 1
        assert page.locator(".cosmos-helpers-form").count() == 1, "the form's static note"
        slider = page.locator(".cosmos-helpers-slider").first
        slider.scroll_into_view_if_needed()
        slider.locator("input[type=range]").fill("80")
        clip = slider.locator(".chx-top").evaluate("img => img.style.clipPath")
        assert clip.replace(" ", "") in ("inset(0px20%0px0px)", "inset(020%00)"), clip
        shoot(slider, shots / "notebook-slider.png")
        page.screenshot(path=str(shots / "notebook-page-full.png"), full_page=True)
        assert not console.errors, "browser console errors:\n" + "\n".join(console.errors)
    finally:
        (shots / "console.log").write_text("\n".join(console.all + ["", "ignored (benign):"] + console.ignored))
        page.close()
