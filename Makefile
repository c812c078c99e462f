# Two commands do all the set-up on a fresh machine with Python 3.10+ and make:
#   make lab    create .venv, install, start JupyterLab; the last line printed is lesson 00's link
#   make test   create .venv, install, run every test (unit, crash, notebooks, grading)
# Both install the exact versions in constraints.txt (`make lock` refreshes it).
PYTHON  ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-test
INSTALL := $(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt
MY_WORK := my_work
PORT    ?=

.PHONY: lab test bench exercises grade report notebooks lock clean

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "durable-lite needs Python 3.10 or newer"'
	$(PYTHON) -m venv $(VENV)
	$(INSTALL) -e '.[test]'
	@touch $(STAMP)

# Copies the exercises you do not have yet into my_work/ (never overwriting yours), starts
# JupyterLab on 127.0.0.1 with a fresh token, waits until it answers, then prints the URL.
lab: $(STAMP)
	@$(BIN)/python -m durable_lite.lab.launch --my-work $(MY_WORK) --log $(VENV)/jupyterlab.log $(if $(PORT),--port $(PORT))

test: $(STAMP)
	$(BIN)/python -m pytest

# The ladder of what a checkpoint costs, from a plain call to DBOS on a Postgres started
# from Python (benchmarks/README.md). A few minutes; progress is printed row by row.
bench: $(STAMP)
	$(INSTALL) -e '.[engines]'
	$(BIN)/python benchmarks/step_overhead.py

# Regenerates exercises/ from solutions/. Your copies in my_work/ are not touched.
exercises: $(STAMP)
	$(BIN)/python -m durable_lite.grading generate

notebooks: $(STAMP)
	$(BIN)/python tests/tools/refresh_notebooks.py

# Scores the notebooks you worked on (make lab copied them into my_work/).
grade: $(STAMP)
	@ls $(MY_WORK)/*.ipynb >/dev/null 2>&1 || { echo "$(MY_WORK)/ holds no notebooks yet: run make lab first (it copies the exercises there)"; exit 1; }
	$(BIN)/python -m durable_lite.grading $(MY_WORK)/*.ipynb

# Grades a class: every notebook under CLASS (one folder per learner), into OUT.
report: $(STAMP)
	$(BIN)/python -m durable_lite.grading report $(or $(CLASS),class) --out $(or $(OUT),report)

# Re-resolves every extra on every Python 3.10+ found here and rewrites constraints.txt.
lock:
	$(PYTHON) tests/tools/lock.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
