# Semantic Saga: the two set-up commands (README) and the developer loop.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PG_URL ?= postgresql://postgres@127.0.0.1:5432/test
PYTEST_WORKERS ?= 2

.PHONY: browser screenshots run test test-sqlite test-postgres conformance lint venv dev-venv bench bench-quick clean a2a-js chaos

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade --quiet pip

venv: $(BIN)/python
	$(BIN)/pip install --quiet -e .

dev-venv: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'

# Relative paths in .env are relative to this directory, wherever a command starts (docs/configuration.md).
.env:
	@echo "SECRET_KEY=$$($(PYTHON) -c 'import secrets; print(secrets.token_urlsafe(50))')" > .env
	@echo "SAGA_ACTIONS_FILE=examples/action_registry.json" >> .env
	@echo "DATABASE_URL=sqlite:///semantic-saga.db" >> .env
	@echo "wrote .env (SECRET_KEY, SAGA_ACTIONS_FILE, DATABASE_URL)"

RUN_URL := http://127.0.0.1:8000

## run: install, migrate, load the example registry, serve on 127.0.0.1:8000 (SQLite, in-process executor)
# A .env written before it held DATABASE_URL gets it, so `semantic-saga mcp` started from another directory
# (Claude Desktop, claude mcp add) uses this database too.
run: venv .env
	@grep -q '^DATABASE_URL=' .env || { echo "DATABASE_URL=sqlite:///semantic-saga.db" >> .env; \
		echo "added DATABASE_URL=sqlite:///semantic-saga.db to .env"; }
	$(BIN)/semantic-saga migrate --no-input
	$(BIN)/semantic-saga collectstatic --no-input --verbosity 0
	$(BIN)/semantic-saga load_actions examples/action_registry.json
	@echo ""
	@echo "Semantic Saga will serve $(RUN_URL)/ (loopback only):"
	@echo "  $(RUN_URL)/admin/                       operator console"
	@echo "  $(RUN_URL)/mcp                          MCP (Streamable HTTP)"
	@echo "  $(RUN_URL)/a2a                          A2A JSON-RPC"
	@echo "  $(RUN_URL)/.well-known/agent-card.json  A2A agent card"
	@echo "  $(RUN_URL)/api/v1/docs/                 REST API (Swagger UI)"
	@echo "  $(RUN_URL)/healthz                      health"
	@echo "First operator account, in another terminal: $(BIN)/semantic-saga createsuperuser"
	@echo ""
	$(BIN)/semantic-saga serve --host 127.0.0.1 --port 8000

## test: install with dev extras, lint, the whole suite on SQLite and again on PostgreSQL, then MCP conformance
test: dev-venv lint a2a-js browser test-sqlite test-postgres conformance

## browser: Debian's Chromium for the console's end-to-end tests (tests/e2e); Playwright drives it, downloads none
browser:
	@command -v chromium >/dev/null 2>&1 || { echo "installing Debian's chromium package"; \
		apt-get update -qq && apt-get install -y -qq chromium; }

## a2a-js: the @a2a-js/sdk peer of tests/protocols/test_a2a_js_client.py, pinned by its package-lock.json
a2a-js: tests/protocols/js/node_modules/.package-lock.json

tests/protocols/js/node_modules/.package-lock.json: tests/protocols/js/package-lock.json
	cd tests/protocols/js && npm ci --no-audit --no-fund --loglevel=error

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	bash .ci/grep-checks
	$(BIN)/lint-imports --no-cache
	DEBUG=true $(BIN)/mypy saga_project sagas registry governance audit

test-sqlite:
	DATABASE_URL=sqlite:///semantic-saga-test.db $(BIN)/pytest -n $(PYTEST_WORKERS) -q

test-postgres:
	DATABASE_URL=$(PG_URL) $(BIN)/pytest -n $(PYTEST_WORKERS) -q

conformance:
	bash conformance/run.sh

## screenshots: re-take docs/img/console-*.png (the console's four main screens) with the end-to-end tests
screenshots: dev-venv
	SAGA_SCREENSHOTS_DIR=docs/img DATABASE_URL=sqlite:///semantic-saga-test.db $(BIN)/pytest tests/e2e -q

## bench: the benchmark suite (bench/run.py) against local PostgreSQL and a private redis-server; prints one table
## and writes bench/results/<date>.json (add BENCH_ARGS=--write-docs to refresh docs/benchmarks.md). Its phase cli
## times each operator verb of the command line beside a bare `python -c pass` (bench/cli_wall.py runs it alone)
bench: dev-venv $(VENV)/.bench-extra
	$(BIN)/python bench/run.py $(BENCH_ARGS)

## bench-quick: the same comparisons with fewer rounds and levels, under two minutes (bench/results/<date>-quick.json)
bench-quick: dev-venv $(VENV)/.bench-extra
	$(BIN)/python bench/run.py --quick $(BENCH_ARGS)

## chaos: the chaos suite (bench/chaos.py, docs/reliability.md): up to 5,000 sagas through 2 serve replicas, 3
## prefork Celery workers and the MCP proxy (in front of a recording MCP server) for 37 minutes of faults (about 1,000 cycles), then the invariants; it drops and creates the
## database chaos on local PostgreSQL and writes bench/results/chaos-<date>.json (CHAOS_ARGS="--sagas 200 --duration 120")
chaos: dev-venv
	$(BIN)/python bench/chaos.py --database-url postgresql://postgres@127.0.0.1:5432/chaos $(CHAOS_ARGS)

# .[dev,bench] (DBOS Transact is a bench-only peer), installed again only when pyproject.toml changes.
$(VENV)/.bench-extra: pyproject.toml $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	touch $@

clean:
	rm -rf $(VENV) staticfiles *.egg-info
