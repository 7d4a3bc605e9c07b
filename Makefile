# Backprop Ninja kit. `make demo` and `make test` do everything on a fresh machine.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# The kit's command line (grader/cli.py; `$(PY) -m grader` is the same)
NINJA := $(VENV)/bin/backprop-ninja
# nbgrader shells out to alembic: the virtualenv's bin/ must be on PATH.
export PATH := $(abspath $(VENV))/bin:$(PATH)
# Bring your own names.txt: `make demo NAMES_TXT=/path/to/names.txt` (or export NAMES_TXT).
NAMES_TXT ?=
export NAMES_TXT
ASSIGNMENT := backprop_ninja
DATA := source/$(ASSIGNMENT)/names.txt
# make test's parallel phase: one pytest worker per core
TEST_WORKERS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: demo test unit integration lint venv data release samples autograde feedback export report suspicious bench clean-run collect-zip gradescope

demo: release samples autograde feedback export report

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

venv: $(VENV)/.installed

data: venv
	$(NINJA) data $(DATA)

release: data
	nbgrader generate_assignment $(ASSIGNMENT) --force
	# what previewing the release in Jupyter leaves is not handed out
	find release -name .ipynb_checkpoints -prune -exec rm -rf {} +

samples: venv
	$(NINJA) samples .

# Preflight, resume, then nbgrader autograde on every core (grader/grading/batch.py); FORCE=1 grades
# everything again; WORKERS=N, SCHEDULER=tcp://HOST:8786 (a Dask cluster) pass through.
autograde: venv
	$(NINJA) grade . $(if $(FORCE),--force) $(if $(WORKERS),--workers $(WORKERS)) $(if $(SCHEDULER),--scheduler $(SCHEDULER))

feedback: venv
	nbgrader generate_feedback $(ASSIGNMENT) --force

export: venv
	mkdir -p exports
	nbgrader export --to exports/grades.csv
	nbgrader export --exporter=grader.reports.exports.GradientsExportPlugin --to exports/gradients.csv

# The table; reports/class.html (plots, pass rates, mistakes, suspicious, timings); exports/*.csv
# (per gradient, Canvas, Moodle). CANVAS_ASSIGNMENT_ID=1234 updates that Canvas assignment.
report: venv
	@echo; echo "Grades (also in exports/; class report in reports/class.html; feedback in feedback/<student>/):"
	@$(NINJA) report . $(if $(CANVAS_ASSIGNMENT_ID),--canvas-assignment-id $(CANVAS_ASSIGNMENT_ID))
	@echo; $(NINJA) suspicious .

# The Gradescope autograder: upload dist/gradescope_autograder.zip. VISIBILITY=hidden|after_due_date|after_published
gradescope: data
	$(NINJA) gradescope build dist/gradescope_autograder.zip $(if $(VISIBILITY),--visibility $(VISIBILITY))

# Fill submitted/ from a Canvas or Moodle "download all submissions" zip: make collect-zip ZIP=path.zip
collect-zip: venv
	$(NINJA) collect . $(ZIP)

suspicious: venv
	$(NINJA) suspicious .

# Speed against named baselines (the local batch and a local Dask cluster), for the corpus (mostly
# attacks) and a class of right answers; a soak of 200 on two Dask workers, one killed mid-batch;
# prints ratios and yes/NO, asserts nothing (machines are shared). Then a feedback page's cost.
bench: data
	$(PY) benchmarks/throughput.py 40
	$(PY) benchmarks/throughput.py 40 --right
	$(PY) benchmarks/soak.py --n 200
	$(PY) benchmarks/autograde_overhead.py 10
	$(PY) benchmarks/feedback_page.py

# Every test, on every core (pytest-xdist): a module's tests on one worker, the users of the
# session's graded class on one (tests/conftest.py), the longest groups first.
test: data
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

# Unit tests only: in-process, seconds (a unit test that starts a process fails: tests/conftest.py).
unit: venv
	$(PY) -m pytest -q tests/unit -m "not integration" -n $(TEST_WORKERS) --dist loadgroup

# The unit modules' tests that start kernels, the sandbox, the replay server or nbgrader.
integration: venv
	$(PY) -m pytest -q tests/unit -m integration -n $(TEST_WORKERS) --dist loadgroup

# ruff, configured in pyproject.toml: errors, unused code, import order, complexity, and the format.
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Forget every run-time state (submissions, grades, feedback); keeps the release.
clean-run:
	rm -rf submitted autograded/*/ feedback exports reports gradebook.db exchange
