# Two commands: `make up` (embedded default, no services) and `make test` (the whole suite).
# `make test-fast` is the inner loop: no browser, Docker, fault-rig or real-agent tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/canvas
TEST_REDIS_URL ?= redis://127.0.0.1:6379/5
# pytest-xdist workers: two per core (the suite waits on workers, servers and faults about a
# third of its time, so one per core left a core idle that much; docs/testing.md), at least 2,
# at most 8 (each takes its own Redis database from TEST_REDIS_URL's number up, and Redis has
# 16; tests/parallel.py). TEST_WORKERS=0: serial.
TEST_WORKERS ?= $(shell n=$$(( $$(nproc 2>/dev/null || echo 1) * 2 )); [ $$n -lt 2 ] && n=2; [ $$n -gt 8 ] && n=8; echo $$n)
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist loadgroup
FAST_LANE := -m "not (browser or docker or faults or acp)"

# pip runs again only when pyproject.toml changes: each stamp's name carries its checksum.
DEPS_SUM := $(firstword $(shell cksum pyproject.toml))
INSTALLED := $(VENV)/.installed-$(DEPS_SUM)
TEST_INSTALLED := $(VENV)/.installed-test-$(DEPS_SUM)
# setuptools warns about editable installs at every build; nothing to act on here.
PIP_INSTALL := PYTHONWARNINGS=ignore::UserWarning $(PY) -m pip install --quiet

.PHONY: up test test-fast install install-test services docker-engine sandbox-image lint bench acp-agents

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(INSTALLED): | $(PY)
	$(PIP_INSTALL) -e .
	@rm -f $(VENV)/.installed-[0-9]* && touch $@

$(TEST_INSTALLED): | $(PY)
	$(PIP_INSTALL) -e '.[test]'
	@rm -f $(VENV)/.installed-* && touch $@ $(INSTALLED)

install: $(INSTALLED)

install-test: $(TEST_INSTALLED)

# Migrations (only when some are pending) and the demo login run inside the server process.
up: install
	$(PY) manage.py serve --prepare --host $(HOST) --port $(PORT)

# Debian's chromium for the browser tests and git for workspace baselines (workspaces/baseline.py);
# Postgres and Redis started when not answering.
services:
	@command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)
	@command -v git >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq git >/dev/null)
	@pg_isready -q -h 127.0.0.1 -p 5432 || pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql) main start
	@redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 || redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
	@for i in $$(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && exit 0; sleep 1; done; echo "Postgres/Redis did not come up" >&2; exit 1

# The default image of Docker workspaces (CANVAS_DOCKER_IMAGE); needs a registry that serves
# debian:bookworm-slim. The tests never use it: they build their own from local packages.
sandbox-image:
	docker build -t canvas-sandbox:latest -f docker/sandbox.Dockerfile docker

# A Docker engine for the Docker workspace tests (workspaces/docker.py): Debian's docker.io when
# none answers, its dockerd started in the background (log in /tmp/canvas-dockerd.log); Debian's
# busybox-static and bash-static build the test image locally (tests/docker_images.py), since no
# image registry is needed or reached.
docker-engine:
	@docker info >/dev/null 2>&1 || command -v dockerd >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null)
	@docker info >/dev/null 2>&1 || (nohup dockerd >/tmp/canvas-dockerd.log 2>&1 &)
	@for i in $$(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done; docker info >/dev/null 2>&1 || { echo "the Docker engine did not come up (see /tmp/canvas-dockerd.log)" >&2; exit 1; }
	@dpkg -s busybox-static bash-static >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq busybox-static bash-static >/dev/null)

# Real third-party ACP agents for tests/acp_bridge/test_real_agent.py, pinned in
# tests/acp_bridge/npm/package-lock.json and installed with `npm ci` into .acp-agents/ (again only
# when the lock changes: the stamp's name carries its checksum). Lifecycle scripts are off: the
# pinned packages need none (the agent's native CLI comes as an npm platform package). Debian's
# nodejs and npm when there is no node.
ACP_AGENTS := .acp-agents
ACP_LOCK := tests/acp_bridge/npm/package-lock.json
ACP_AGENTS_STAMP := $(ACP_AGENTS)/.installed-$(firstword $(shell cksum $(ACP_LOCK)))

$(ACP_AGENTS_STAMP): $(ACP_LOCK) tests/acp_bridge/npm/package.json
	@command -v node >/dev/null && command -v npm >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null)
	@mkdir -p $(ACP_AGENTS)
	cp tests/acp_bridge/npm/package.json $(ACP_LOCK) $(ACP_AGENTS)/
	npm ci --prefix $(ACP_AGENTS) --ignore-scripts --no-audit --no-fund --loglevel=error
	@rm -f $(ACP_AGENTS)/.installed-* && touch $@

acp-agents: $(ACP_AGENTS_STAMP)

RUN_TESTS := DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) LITELLM_LOCAL_MODEL_COST_MAP=True \
	$(PY) -m pytest $(PYTEST_PARALLEL)

test: install-test services docker-engine acp-agents
	$(RUN_TESTS) $(PYTEST_ARGS)

# The inner loop: everything but the browser, Docker, fault-rig and real-agent lanes (docs/testing.md).
test-fast: install-test services
	$(RUN_TESTS) $(FAST_LANE) $(PYTEST_ARGS)

lint: install-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: install-test services
	SECRET_KEY=$${SECRET_KEY:-bench-only-not-a-secret} \
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) LITELLM_LOCAL_MODEL_COST_MAP=True \
		$(PY) bench/run_all.py
