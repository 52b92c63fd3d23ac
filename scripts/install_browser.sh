#!/usr/bin/env bash
# Install what the real-browser tests (tests/browser/) need; safe to run again.
#
#   - Chromium from the distribution (/usr/bin/chromium). Playwright drives this system browser through
#     executable_path; we never run `playwright install` (no browser downloads from the Playwright CDN).
#   - The Playwright Python package into the project's Python (and JupyterLab, a package dependency, where an
#     environment was set up without it).
#
# Usage: scripts/install_browser.sh [PYTHON]   (default: $PYTHON, else /tmp/venv/bin/python, else python3)
set -euo pipefail

PY="${1:-${PYTHON:-}}"
if [[ -z "$PY" ]]; then
  if [[ -x /tmp/venv/bin/python ]]; then PY=/tmp/venv/bin/python; else PY=python3; fi
fi

SUDO=""
if [[ "$(id -u)" != "0" ]] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi

if [[ ! -x /usr/bin/chromium ]]; then
  echo "installing chromium (apt)"
  export DEBIAN_FRONTEND=noninteractive
  APT=(apt-get -o DPkg::Lock::Timeout=900)  # another install in progress (a second checkout's setup): wait for it
  if ! $SUDO "${APT[@]}" install -y --no-install-recommends chromium; then
    $SUDO "${APT[@]}" update
    $SUDO "${APT[@]}" install -y --no-install-recommends chromium
  fi
else
  echo "chromium present: $(/usr/bin/chromium --version 2>/dev/null || echo /usr/bin/chromium)"
fi

# Chromium's proprietary-codec build is what plays H.264/AAC in <video>; Debian's chromium ships it.
missing=()
"$PY" -c "import playwright" 2>/dev/null || missing+=("playwright")
"$PY" -c "import jupyterlab" 2>/dev/null || missing+=("jupyterlab")
if (( ${#missing[@]} )); then
  echo "installing ${missing[*]} (pip)"
  "$PY" -m pip install --quiet "${missing[@]}"
else
  echo "playwright and jupyterlab present"
fi

"$PY" - <<'PYEOF'
import importlib.metadata as md
for name in ("playwright", "jupyterlab", "ipywidgets", "jupyterlab_widgets"):
    try:
        print(f"{name} {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name} MISSING")
PYEOF
