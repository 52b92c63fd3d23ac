# Two entry points for a fresh machine:
#   make cookbooks   set up .venv and execute every cookbook on the embedded tiny model into ./outputs
#   make test        set up .venv (with test tools and a headless browser) and run the whole test suite
#   make lab         set up .venv and open the cookbooks in JupyterLab (LAB="--ip 0.0.0.0 --token WORD" for a workshop)
# Both are idempotent: a second run reuses the environment.

PYTHON ?= python3
VENV   ?= .venv
OUT    ?= outputs
BIN     = $(VENV)/bin
# The CPU build of torch is enough for everything here; on a CUDA host pip picks the right build.
TORCH  ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && echo "torch" || echo "torch==2.13.0")

.PHONY: setup setup-test cookbooks test lab clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[test]"
	touch $@

setup: $(VENV)/.installed

$(VENV)/.browser: $(VENV)/.installed scripts/install_browser.sh
	bash scripts/install_browser.sh $(BIN)/python
	touch $@

setup-test: $(VENV)/.browser

cookbooks: setup
	$(BIN)/cosmos-helpers run-cookbooks --out $(OUT)

lab: setup
	$(BIN)/cosmos-helpers lab $(LAB)

test: setup-test
	COSMOS_HELPERS_REQUIRE_BROWSER=1 $(BIN)/python -m pytest tests

clean:
	rm -rf $(VENV) $(OUT)
