# Two commands set up a fresh machine: `make demo` (the main job on the embedded model)
# and `make test` (the test suite). Both create .venv and install what they need.
VENV ?= .venv
PY := $(VENV)/bin/python
# llama.cpp must be built portably: a native build dies with "Illegal instruction" on CPUs
# that advertise AMX.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF

.PHONY: setup dev-setup system-deps test-system-deps demo test lint clean

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[local,viewer,plot]"
	touch $@

# The tests also fine-tune with TRL, which needs PyTorch: pinned to 2.13.0 because a CPU build
# of that release lies on disk on our machines, while an unpinned torch pulls a CUDA build of
# several GB.
$(VENV)/.installed-dev: $(VENV)/.installed
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[local,dev]"
	touch $@

# bubblewrap confines the sandbox (network off, filesystem read-only); optional but used
# when present. Installed with apt when we are root on Debian/Ubuntu. The demo needs only it.
system-deps:
	@if ! command -v bwrap >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; fi

# What the tests add: chromium, the browser the viewer's Playwright tests drive (Playwright
# cannot download its own), and postgresql, since the store's tests run on a throwaway
# PostgreSQL server as well as on SQLite.
test-system-deps: system-deps
	@if { ! command -v chromium >/dev/null 2>&1 || ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; } && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && apt-get install -y -qq chromium postgresql >/dev/null; fi

setup: system-deps $(VENV)/.installed

dev-setup: test-system-deps setup $(VENV)/.installed-dev

demo: setup
	$(VENV)/bin/sharpen demo

# mypy first ([tool.mypy] in pyproject.toml): a type error fails `make test`.
test: dev-setup
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest -q

lint: dev-setup
	$(VENV)/bin/ruff check src tests

# The store (.sharpen/: runs, annotations, experiments) is the user's data: never removed here.
clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache
	@echo "kept .sharpen/ (your store); delete it yourself if you mean to"
