# Sluice — run `make help` for the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ZK_JAR := /usr/share/java/zookeeper.jar
# apt-get needs root; use sudo when we are not root and it exists.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"; printf "Sluice targets:\n"} /^[a-zA-Z_-]+:.*##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,spark,bench]'
	touch $(STAMP)

.PHONY: install
install: $(STAMP) ## Create .venv with Sluice and its test dependencies

.PHONY: system-deps
system-deps: ## Install Debian packages the tests need (Java, ZooKeeper, PostgreSQL, kcat, iproute2, unshare, fuse3) when missing
	@if [ ! -f $(ZK_JAR) ] || ! command -v java >/dev/null || ! command -v kcat >/dev/null \
	    || ! command -v ip >/dev/null || ! command -v tc >/dev/null || ! command -v unshare >/dev/null \
	    || ! command -v fusermount3 >/dev/null || ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  echo "installing Debian's zookeeper, a JRE, postgresql (the Iceberg catalog), kcat, iproute2 (network"; \
	  echo "namespaces), util-linux (unshare) and fuse3 (libfuse 3: the soak's slow disk)"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq zookeeper default-jre-headless kcat \
	    iproute2 util-linux fuse3 postgresql >/dev/null; \
	fi

# mypy resolves modules by path, not through the editable install's import hook, so it reads
# the packages through a tree of links laid out as they are installed (sluice/broker -> broker).
TYPECHECK := build/typecheck

.PHONY: typecheck
typecheck: install ## mypy --strict on every package, through the installed layout
	@mkdir -p $(TYPECHECK)/sluice
	@for entry in sluice/*; do ln -sfn ../../../$$entry $(TYPECHECK)/sluice/; done
	@for folder in broker pipeline schemas jobs; do ln -sfn ../../../$$folder $(TYPECHECK)/sluice/$$folder; done
	MYPYPATH=$(TYPECHECK) $(BIN)/mypy -p sluice

.PHONY: lint
lint: install typecheck ## ruff format --check, ruff check, mypy on every package
	$(BIN)/ruff format --check sluice broker pipeline schemas jobs tests bench
	$(BIN)/ruff check sluice broker pipeline schemas jobs tests bench

.PHONY: test
test: install system-deps lint ## Lint, then run the whole suite (slow fault-injection tests included)
	$(BIN)/pytest -q

.PHONY: test-fast
test-fast: install ## The suite without the slow fault-injection tests
	$(BIN)/pytest -q -m "not slow"

.PHONY: demo
demo: install system-deps ## A standalone broker + registry, Avro events, two nightly loads via spark-submit into an Iceberg table, a query of it, then stop
	$(BIN)/python -m sluice.jobs.demo

.PHONY: demo-datacenter
demo-datacenter: install system-deps ## The paper's deployment: live + offline clusters, mirror, nightly load into Iceberg, audit
	$(BIN)/python -m sluice.jobs.demo_datacenter

.PHONY: compat
compat: install system-deps ## kafka-python's own integration suite vs Sluice: standalone, then a 3-broker cluster (build/compat/)
	$(BIN)/python -m tests.compat.run

.PHONY: soak
soak: install system-deps ## Faults against a three-broker cluster for SOAK_MINUTES (default 4; needs root); results in build/soak/
	$(BIN)/python -m bench.soak

.PHONY: bench
bench: install ## Quick benchmarks (under 10 minutes); results in build/bench/
	$(BIN)/python -m bench.run --quick

.PHONY: bench-scale
bench-scale: install ## Throughput as the log grows (1 GB; FULL=1 for 5 GB)
	$(BIN)/python -m bench.run --only scale $(if $(FULL),--full,--quick)

.PHONY: bench-peers
bench-peers: install ## Sluice vs Tansu, RabbitMQ, ActiveMQ (installs them when missing)
	$(BIN)/python -m bench.run --quick --only peers

.PHONY: bench-full
bench-full: install ## Full benchmarks
	$(BIN)/python -m bench.run --full

.PHONY: clean
clean: ## Remove the venv, build outputs and demo data
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis data warehouse
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
