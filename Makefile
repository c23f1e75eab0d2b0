# fusiongen's tasks. Every target that needs Python creates the virtualenv first, from scratch if needed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SPECS := $(wildcard specs/*.toml)
# Folder specs (docs/spec.md §3.1): the examples keep [server] in server.toml.
SPEC_FOLDERS := $(patsubst %/server.toml,%,$(wildcard specs/*/server.toml))
# pytest workers (pytest-xdist): one per core of the 2-core machines this project runs on; JOBS=1 runs in one process.
JOBS ?= 2

.PHONY: venv demo check test soak golden check-golden lint bench redis-server haproxy tooling langchain agents clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $(STAMP)

venv: $(STAMP)

## demo: build the reference server and drive it over stdio with a scripted MCP client
demo: venv
	$(BIN)/fusiongen build specs/billing.toml -o .demo
	$(BIN)/python specs/demo_client.py .demo

## check: the fast tier, for every change (measured times in README.md, "Contributing"): lint, then the case
## corpus and the unit tests, which run generated servers in-process or once in a subprocess; no Redis, HTTP
## servers, Node tooling or other clients. `make test` runs these and everything else. Both spread the tests
## over JOBS processes (pytest-xdist, work-stealing: a worker that runs out takes tests from the other).
CHECK_TESTS := tests/test_cases.py tests/test_architecture.py tests/test_docs.py tests/test_expr.py tests/test_fuzz_server.py \
	tests/test_generated_quality.py tests/test_golden.py tests/test_json_fields.py tests/test_map_fields.py \
	tests/test_imports.py tests/test_output_formats.py tests/test_presenter_diagnostics.py tests/test_presenters.py \
	tests/test_prune.py tests/test_pyliteral.py \
	tests/test_generated_size.py tests/test_report_exposure.py tests/test_runtime.py tests/test_runtime_gate.py \
	tests/test_runtime_source.py tests/test_runtime_surface.py \
	tests/test_server_semantics.py tests/test_surface.py tests/test_testing_helper.py tests/test_tool_errors.py \
	tests/test_tool_names.py tests/test_toml_positions.py tests/test_wire_fast_path.py \
	tests/test_workflow_diagnostics.py tests/test_workflow_model_checks.py tests/test_workflows.py
check: venv lint
	$(BIN)/python -m pytest -q -n $(JOBS) --dist worksteal $(CHECK_TESTS)

## test: everything (the virtualenv, redis-server and haproxy from Debian, the npm tooling, the agent clients'
## virtualenvs, lint, then pytest)
test: venv redis-server haproxy tooling langchain agents lint
	$(BIN)/python -m pytest -n $(JOBS) --dist worksteal

## soak: the long load tests (pytest marker `soak`), which a plain pytest leaves out: an HTTP server on Redis under
## sustained mixed load for SOAK_SECONDS (default 60) from SOAK_CLIENTS (default 4) clients
soak: venv redis-server
	$(BIN)/python -m pytest -m soak -s

## redis-server: the real Redis the workflow-store tests run against (Debian package)
redis-server:
	@command -v redis-server >/dev/null 2>&1 || { \
		echo "installing Debian's redis-server"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }

## haproxy: the real load balancer tests/test_scale_out.py runs examples/haproxy/haproxy.cfg in (Debian package;
## Debian installs it in /usr/sbin, hence the PATH)
haproxy:
	@PATH="$$PATH:/usr/sbin" command -v haproxy >/dev/null 2>&1 || { \
		echo "installing Debian's haproxy"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >/dev/null; }

## tooling: the official MCP tools that tests/test_official_tooling.py runs (Inspector, conformance suite,
## Node 22), installed from tooling/package-lock.json
TOOLING_STAMP := tooling/node_modules/.installed
$(TOOLING_STAMP): tooling/package.json tooling/package-lock.json
	npm ci --prefix tooling --no-audit --no-fund
	touch $(TOOLING_STAMP)

tooling: $(TOOLING_STAMP)

## langchain: langchain-mcp-adapters, one of the clients tests/test_client_matrix.py drives generated servers
## with, in its own virtualenv: it pins mcp<2, which the project's .venv (mcp 2.x) cannot hold
LANGCHAIN_VENV := .venv-langchain
LANGCHAIN_REQUIREMENTS := tests/support/langchain-requirements.txt
LANGCHAIN_STAMP := $(LANGCHAIN_VENV)/.installed
$(LANGCHAIN_STAMP): $(LANGCHAIN_REQUIREMENTS)
	$(PYTHON) -m venv $(LANGCHAIN_VENV)
	$(LANGCHAIN_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LANGCHAIN_VENV)/bin/python -m pip install --quiet -r $(LANGCHAIN_REQUIREMENTS)
	touch $(LANGCHAIN_STAMP)

langchain: $(LANGCHAIN_STAMP)

## agents: the six agent clients tests/test_agent_clients.py drives generated servers with, in two virtualenvs
## beside the project's: openai-agents, google-adk and llama-index on mcp 2.x (.venv-agents); smolagents with
## mcpadapt, autogen-ext and the bare mcp 1.x ClientSession on mcp 1.30, which mcpadapt and autogen-ext need
## (.venv-agents-mcp1)
AGENTS_VENV := .venv-agents
AGENTS_REQUIREMENTS := tests/support/agents-requirements.txt
AGENTS_STAMP := $(AGENTS_VENV)/.installed
$(AGENTS_STAMP): $(AGENTS_REQUIREMENTS)
	$(PYTHON) -m venv $(AGENTS_VENV)
	$(AGENTS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(AGENTS_VENV)/bin/python -m pip install --quiet -r $(AGENTS_REQUIREMENTS)
	touch $(AGENTS_STAMP)

AGENTS_MCP1_VENV := .venv-agents-mcp1
AGENTS_MCP1_REQUIREMENTS := tests/support/agents-mcp1-requirements.txt
AGENTS_MCP1_STAMP := $(AGENTS_MCP1_VENV)/.installed
$(AGENTS_MCP1_STAMP): $(AGENTS_MCP1_REQUIREMENTS)
	$(PYTHON) -m venv $(AGENTS_MCP1_VENV)
	$(AGENTS_MCP1_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(AGENTS_MCP1_VENV)/bin/python -m pip install --quiet -r $(AGENTS_MCP1_REQUIREMENTS)
	touch $(AGENTS_MCP1_STAMP)

agents: $(AGENTS_STAMP) $(AGENTS_MCP1_STAMP)

## golden: rewrite golden/ from specs/, and expected/ + stderr.txt of every tests/cases/ case
golden: venv
	@for spec in $(SPECS); do \
		name=$$(basename $$spec .toml); \
		$(BIN)/fusiongen build $$spec -o golden/$$name || exit $$?; \
	done
	@for spec in $(SPEC_FOLDERS); do \
		$(BIN)/fusiongen build $$spec -o golden/$$(basename $$spec) || exit $$?; \
	done
	$(BIN)/python -m tests.support.cases --update

## check-golden: fail if golden/ is not what specs/ generate (the same check CI runs)
check-golden: venv
	@for spec in $(SPECS); do \
		name=$$(basename $$spec .toml); \
		$(BIN)/fusiongen check $$spec -o golden/$$name || exit $$?; \
	done
	@for spec in $(SPEC_FOLDERS); do \
		$(BIN)/fusiongen check $$spec -o golden/$$(basename $$spec) || exit $$?; \
	done

## lint: ruff's checks and formatting over everything, and mypy --strict over the generator (the runtime included)
lint: venv
	$(BIN)/ruff check fusiongen tests bench specs
	$(BIN)/ruff format --check fusiongen tests bench specs
	$(BIN)/mypy --strict fusiongen

bench: venv
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) $(LANGCHAIN_VENV) $(AGENTS_VENV) $(AGENTS_MCP1_VENV) .demo dist build tooling/node_modules
