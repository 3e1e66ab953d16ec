# The two quick-start commands (see README.md). Each sets up .venv itself.
# the venv tools/setup_env.sh makes: $MMPOS_VENV where set (the Docker
# image), else .venv
VENV ?= $(or $(MMPOS_VENV),.venv)
PYTHON := $(VENV)/bin/python

.PHONY: setup demo test docs

setup:
	bash tools/setup_env.sh

demo: setup
	$(PYTHON) tools/demo.py

test: setup
	PYTHON=$(PYTHON) bash tools/run_tests.sh

# The docs site into docs/_build/html; warnings (a broken link, a path that
# does not exist, a stale generated table) are errors.
docs: setup
	$(PYTHON) -m sphinx -W --keep-going -b html -q docs docs/_build/html
