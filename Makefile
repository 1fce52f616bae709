# Fresh-machine entry points: `make quickstart` (the main job) and `make test` (the full suite).
# Both create .venv and install kbert into it on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
export TF_CPP_MIN_LOG_LEVEL ?= 2

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

.PHONY: install test quickstart
install: $(VENV)/.installed

test: $(VENV)/.installed
	$(PY) -m pytest -q

quickstart: $(VENV)/.installed
	$(VENV)/bin/kbert quickstart
