# The two quick-start commands (see README.md). Each sets up .venv itself.
VENV ?= .venv
PYTHON := $(VENV)/bin/python

.PHONY: setup demo test

setup:
	bash tools/setup_env.sh

demo: setup
	$(PYTHON) tools/demo.py

test: setup
	bash tools/run_tests.sh
