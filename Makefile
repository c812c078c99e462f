# Two commands do all the set-up on a fresh machine with Python 3.10+ and make:
#   make lab    create .venv, install, start JupyterLab; the last line printed is lesson 00's link
#   make test   create .venv, install, run every test (unit, crash, notebooks, grading)
#   make hub    the course for a whole class, in their browsers (Linux; README: Run it on one server)
# Both install the exact versions in constraints.txt (`make lock` refreshes it).
PYTHON  ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-test
INSTALL := $(BIN)/python -m pip install --disable-pip-version-check --progress-bar on -c constraints.txt
MY_WORK := my_work
PORT    ?=
HOST    ?=

.PHONY: lab hub test bytecode bench exercises grade report notebooks lock clean

# The first install takes minutes (README: "Two commands"), so it shows its progress: pip's
# line per package, then, while pip unpacks them all without a word, how many are in place.
$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c pass || { echo "make: cannot run PYTHON=$(PYTHON). Name a Python 3.10+ by its path, for example PYTHON=/usr/bin/python3.12, or with pyenv PYTHON=\"\$$(pyenv prefix 3.12.1)/bin/python\" (README: Which Python)"; exit 1; }
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "durable-lite needs Python 3.10 or newer"'
	@echo "Installing the course into $(VENV) with $$($(PYTHON) -c 'import sys; print(sys.executable, sys.version.split()[0])'): the first time takes a few minutes; pip lists each package as it goes."
	$(PYTHON) -m venv $(VENV)
	@# compat: the package is found through a plain path in a .pth file. The default editable
	@# install adds an import hook that imports pathlib and urllib at every Python's start,
	@# about 10 ms each time; a crash sweep or a class's grading starts thousands of them.
	$(BIN)/python tests/tools/install_progress.py $(INSTALL) -e '.[test]' --config-settings editable_mode=compat
	@touch $(STAMP)

# The package's and the tests' compiled bytecode, brought up to date (quick when it is). Where
# PYTHONDONTWRITEBYTECODE is set, Python never writes it, and every one of the thousands of
# processes the lessons, the grader and the tests start would compile the package again:
# about 30 ms each. The test modules as pytest runs them too (their asserts rewritten):
# otherwise each of make test's workers rewrites them all as it collects.
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q durable_lite tests > /dev/null
	@$(BIN)/python tests/tools/rewrite_tests.py

# Copies the exercises and the crash playground you do not have yet into my_work/ (never
# overwriting yours), starts JupyterLab on 127.0.0.1 with a fresh token and the lessons in
# notebooks/ read-only, waits until it answers, then prints the URL.
lab: $(STAMP) bytecode
	@$(BIN)/python -m durable_lite.lab.launch --my-work $(MY_WORK) --log $(VENV)/jupyterlab.log $(if $(PORT),--port $(PORT))

# A workshop server: JupyterHub serves the course to a class, each learner their own
# JupyterLab and my_work/; the state (learners, their work, the class code) stays in hub/.
# Prints the learners' link and code, and the instructor's. Listens on every interface
# (HOST=127.0.0.1: this machine only); PORT= picks the port. Ctrl-C stops all of it. As
# root, each learner becomes a system user of their own; ONE_USER=1 runs them all as root.
# The hub extra (JupyterHub, its proxy, the idle culler) is part of the test install.
hub: $(STAMP) bytecode
	@$(BIN)/python -m durable_lite.hub.launch $(if $(PORT),--port $(PORT)) $(if $(HOST),--ip $(HOST)) $(if $(ONE_USER),--one-user)

# Each test file (each notebook) runs whole on one worker, its tests in order; files are
# shared among two workers more than the cores (at most 4), the longest first
# (tests/conftest.py). The few attacks that plant files in the package or site-packages
# run afterwards, by themselves: beside other grading, the other runs' guards would find
# them too.
test: $(STAMP) bytecode
	$(BIN)/python -m pytest -n auto --maxprocesses 4 --dist loadfile --no-loadscope-reorder -m "not alone"
	$(BIN)/python -m pytest -m alone tests/test_grading_attacks.py tests/test_grading_report.py

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
