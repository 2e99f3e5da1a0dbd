# Two commands on a fresh machine: `make demo` and `make test`. Both install from uv.lock first.
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv

.PHONY: install demo test lint bench sample clean

$(UV):
	python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip uv

# --compile-bytecode: .pyc files written once here, so every `goodput` command starts without
# compiling scipy / polars / dagster from source (also where PYTHONDONTWRITEBYTECODE is set)
install: $(UV)
	$(UV) sync --frozen --all-groups --compile-bytecode --python $(PY)

demo: install
	$(VENV)/bin/goodput demo

# one pytest worker per core (pytest-xdist); a test file stays on one worker, so its module
# fixtures are built once. --durations lists the slowest tests at the end of the log.
test: install
	$(PY) -m pytest -n auto --dist loadfile --durations=15

lint: install
	$(VENV)/bin/ruff check .

bench: install
	$(PY) -m benchmarks.run_all

clean:
	rm -rf goodput_home .pytest_cache
