# `make demo` and `make test` create .venv when missing and install what they need;
# the install re-runs only when pyproject.toml changes.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test test-slow lint format protos bench profile java browser clean corpus-real

demo: java $(STAMP)
	$(VENV)/bin/cqengine demo

# pytest-xdist's workers: the suite's live rings wait as much as they compute, so one more
# worker than cores keeps both busy (tests/support/parallel.py keeps the workers apart)
WORKERS ?= 3
ifneq ($(filter test,$(MAKECMDGOALS)),)
START := $(shell date +%s)
endif
test: java browser lint
	@$(PY) -m pytest -q -n $(WORKERS); status=$$?; \
	echo "make test: $$(( $$(date +%s) - $(START) )) s in all (venv, lint and pytest)"; \
	exit $$status

# ruff: lint and format check (line length 100, pyproject.toml); `make format` rewrites.
# mypy: the core and the ring type-checked strictly ([tool.mypy] in pyproject.toml)
lint: $(STAMP)
	$(VENV)/bin/ruff check --no-cache .
	$(VENV)/bin/ruff format --no-cache --check .
	$(VENV)/bin/mypy

format: $(STAMP)
	$(VENV)/bin/ruff format --no-cache .
	$(VENV)/bin/ruff check --no-cache --fix .

test-slow: java $(STAMP)
	$(PY) -m pytest -q -m slow

protos: $(STAMP)
	$(PY) protos/generate.py

bench: $(STAMP)
	$(PY) experiments/bench_routing.py
	$(PY) experiments/bench_live.py
	$(PY) experiments/bench_subscribe.py
	$(PY) experiments/bench_replica_intake.py
	$(PY) experiments/bench_prep.py
	$(PY) experiments/bench_synopsis.py
	$(PY) experiments/bench_sim.py
	$(PY) experiments/bench_batching.py
	$(PY) experiments/bench_failures.py
	$(PY) experiments/bench_churn.py
	$(PY) experiments/bench_hostile.py
	$(PY) experiments/bench_boolean.py
	$(PY) experiments/bench_console.py
	$(PY) experiments/bench_headroom.py

# real text: Debian's documentation as a 10,000-document corpus, analyzed by prep into
# prep-real/ (apt-get install postgresql-doc-15 debian-handbook python3.11-doc first)
REAL_PACKAGES ?= postgresql-doc-15 debian-handbook python3.11-doc
corpus-real: java $(STAMP)
	$(VENV)/bin/cqengine corpus debian --out corpus-real --packages $(REAL_PACKAGES) --words 250 --docs 10000
	$(VENV)/bin/cqengine prep --input corpus-real/*.trec.gz --out prep-real

# one live node's time under load, sampled by py-spy (needs the right to trace processes)
profile: $(STAMP)
	$(PY) experiments/profile_live.py

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

# Spark (corpus preprocessing, workloads) runs on the JVM: say so before anything else fails.
java:
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9][0-9]*\).*/\1/p' | head -n 1); \
	if [ -z "$$v" ] || [ "$$v" -lt 17 ]; then \
	  echo "make: Java 17 or newer is required (Spark runs on it); found: $${v:-no java on PATH}." >&2; \
	  echo "make: install it, e.g. 'apt-get install openjdk-17-jre-headless', and run make again." >&2; \
	  exit 1; \
	fi

# The console's browser test drives Debian's headless Chromium: installed here when missing
# and we may (root, apt reachable); otherwise the test is skipped and says why.
browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "make: installing chromium and chromium-driver for the console's browser test"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null \
	      || echo "make: could not install Chromium: the console's browser test is skipped" >&2; \
	  else \
	    echo "make: no Chromium (apt-get install chromium chromium-driver): the console's browser test is skipped" >&2; \
	  fi; \
	fi

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info
