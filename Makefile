# Two commands do all the set-up on a fresh machine with Python 3.10+ and make:
#   make lab    create .venv, install, open JupyterLab on the course
#   make test   create .venv, install, run every test (unit, crash, notebooks, grading)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-test

.PHONY: lab test bench exercises grade notebooks clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "durable-lite needs Python 3.10 or newer"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

# JupyterLab refuses to run as root unless told; containers and fresh VMs often are root.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: $(STAMP)
	$(BIN)/jupyter lab $(ROOT_FLAG) --notebook-dir=. notebooks/00_welcome.ipynb

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[bench]'
	$(BIN)/python benchmarks/step_overhead.py

exercises: $(STAMP)
	$(BIN)/python -m durable_lite.grading generate

notebooks: $(STAMP)
	$(BIN)/python tests/tools/refresh_notebooks.py

grade: $(STAMP)
	$(BIN)/python -m durable_lite.grading exercises/*.ipynb

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
