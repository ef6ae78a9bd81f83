# The two set-up commands of the README. Each creates ./venv if needed.
VENV ?= venv
PY := $(VENV)/bin/python

.PHONY: plan test lint docs local local-apply local-down e2e e2e-fleet

$(VENV)/.installed: requirements.txt requirements-dev.txt policy/requirements.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

plan: $(VENV)/.installed  ## offline plan of the dev stack (STACK=prod for prod)
	$(PY) -m bootstrap plan --stack $(or $(STACK),dev)

test: $(VENV)/.installed  ## the test suite
	$(PY) -m pytest

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

docs: $(VENV)/.installed  ## regenerate the config's JSON Schema and the README's reference from stack.py
	$(PY) -m components.core.config.docs --write

local: $(VENV)/.installed  ## the stack's cluster half on a local control plane (STACK=dev); prints the KUBECONFIG
	$(PY) -m local up --stack $(or $(STACK),dev)

local-apply: $(VENV)/.installed  ## re-render the running local cluster's stack and apply it (after pause/resume)
	$(PY) -m local apply $(if $(STACK),--stack $(STACK))

local-down: $(VENV)/.installed  ## stop the local control plane and delete its state
	$(PY) -m local down

e2e: $(VENV)/.installed  ## end-to-end tests on the local control plane (builds it first, cached)
	$(PY) -m local build
	GPUCLUSTER_E2E=1 $(PY) -m pytest -n 0 tests/e2e  # one control plane: one process

e2e-fleet: $(VENV)/.installed  ## a fleet on three local control planes: a manager and two workers (MultiKueue)
	$(PY) -m local build
	GPUCLUSTER_E2E=1 $(PY) -m pytest -n 0 tests/e2e_fleet
