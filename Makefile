# The two quick-start commands (see README.md). Each sets up .venv itself.
VENV ?= .venv
PYTHON := $(VENV)/bin/python

.PHONY: setup demo test docs

setup:
	bash tools/setup_env.sh

demo: setup
	$(PYTHON) tools/demo.py

test: setup
	bash tools/run_tests.sh

# The docs site into docs/_build/html; warnings (a broken link, a path that
# does not exist, a stale generated table) are errors.
docs: setup
	$(PYTHON) -m sphinx -W --keep-going -b html -q docs docs/_build/html
