# Two commands for a newcomer: `make demo` and `make test`. Each creates .venv itself.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
EXTRAS ?= dev,tiktoken,anthropic,openai,lexical,langgraph

.PHONY: demo test lint typecheck bench clean

$(BIN)/.installed-demo: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(BIN)/.installed-dev: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
	touch $@ $(BIN)/.installed-demo

demo: $(BIN)/.installed-demo
	$(BIN)/ctxwise demo

lint: $(BIN)/.installed-dev
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(BIN)/.installed-dev
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest

bench: $(BIN)/.installed-dev
	$(BIN)/python benchmarks/bench_tokens.py
	$(BIN)/python benchmarks/bench_assembly.py
	$(BIN)/python benchmarks/bench_inspect.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
