# Fresh-machine entry points: `make quickstart` (the main job) and `make test` (the full suite).
# Both create .venv and install kbert into it on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
export TF_CPP_MIN_LOG_LEVEL ?= 2

# constraints.txt pins every package to the versions the suite last passed on, so that a new
# upstream release cannot change what a fresh machine tests; pyproject.toml keeps ranges.
$(VENV)/.installed: pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e ".[test]"
	touch $@

.PHONY: install test test-fast quickstart constraints docs
install: $(VENV)/.installed

# After `make test` passes on newer packages (pip install -U in .venv): pin them.
constraints: $(VENV)/.installed
	{ sed '/^[^#]/Q' constraints.txt; $(PY) -m pip freeze --exclude-editable | grep -v '^#' \
	  | sed 's/+cpu$$//'; } > constraints.txt.new && mv constraints.txt.new constraints.txt

test: $(VENV)/.installed
	$(PY) -m pytest -q -n 2

# The fast tier: every module's unit tests, no processes, notebooks or long training.
test-fast: $(VENV)/.installed
	$(PY) -m pytest -q -n 2 --fast

quickstart: $(VENV)/.installed
	$(VENV)/bin/kbert quickstart

# The docs site (MkDocs): warnings, broken links and missing references are errors.
docs: $(VENV)/.installed
	$(VENV)/bin/mkdocs build --strict --site-dir site
