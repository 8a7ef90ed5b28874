# Two commands set everything up on a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
EVAL_GENERATORS ?= pgm,marginals,privbayes

.PHONY: install demo evaluate test bench bench-fidelity clean server server-stop docs

# A local Prefect server in the background, and this user's Prefect profile pointed at it:
# every later `dprelease` call skips Prefect's temporary server (seconds instead of 15-25 s).
# `dprelease server start` detaches it (own session, log and pid file in PREFECT_HOME), waits
# for its health check and says so when one already runs; `make server-stop` stops it
# (dprelease/cli/server.py).
server: $(STAMP)
	$(BIN)/dprelease server start

server-stop: $(STAMP)
	$(BIN)/dprelease server stop

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The census-like demo table of the Prefect deployment (generated: a known model, 30k rows).
data/census.csv: $(STAMP) data/make_demo_tables.py
	$(BIN)/python data/make_demo_tables.py

# A real release of the bundled breast-cancer table into releases/ (epsilon 1 of its cap 10),
# with every default; the ledger is the per-user default ($$DPRELEASE_HOME to move it). Its
# verdict is "not usable" (569 rows, 31 columns: exit 5), and the demo goes on to the ledger.
demo: $(STAMP) data/census.csv
	$(BIN)/dprelease release data/breast_cancer.csv --schema data/breast_cancer.yaml \
		--epsilon 1.0 --out releases --seed 0 || test $$? -eq 5
	$(BIN)/dprelease ledger show breast-cancer

# The paper's utility study on the bundled breast-cancer table (results in evaluations/).
evaluate: $(STAMP)
	$(BIN)/dprelease evaluate data/breast_cancer.csv --schema data/breast_cancer.yaml \
		--generators $(EVAL_GENERATORS) --epsilons 1,6 --seeds 10 --out evaluations

# Two pytest processes (pytest-xdist), one per core, each taking the next test when it is free
# (worksteal): 7:17 on an idle 2-core machine (three processes: 7:59). The tests that need
# Prefect share one real server (tests/prefect_server.py).
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n 2 --dist worksteal --durations=10

# The documentation site into site/ (the docs extra, part of dev: MkDocs, Material,
# mkdocstrings); --strict fails on any broken link or reference. The CLI reference is
# generated from the typer app. CI runs it after the tests (.ci/run).
docs: $(STAMP)
	$(BIN)/mkdocs build --strict

BENCHMARKS := release psis weights generators weights_fraction cli_latency accounting \
	adaptive_truncation abcdp abcdp_calibration scale gan_discriminator_weights

bench: $(STAMP)
	set -e; for name in $(BENCHMARKS); do $(BIN)/python benchmarks/$$name.py; done

# The fidelity study (benchmarks/fidelity.py: every table, method and seed of its defaults; its
# peers need OpenDP's mbi extra and dpmm's own venv, see its docstring), then docs/benchmarks.md
# rendered from its artefacts in benchmarks/results/. FIDELITY_ARGS narrows it, e.g.
# `make bench-fidelity FIDELITY_ARGS="--tables boston --seeds 2 --methods real-train dprelease"`.
FIDELITY_ARGS ?=
bench-fidelity: $(STAMP)
	$(BIN)/python benchmarks/fidelity.py $(FIDELITY_ARGS)
	$(BIN)/python benchmarks/render_results.py

clean:
	rm -rf releases evaluations .pytest_cache site
