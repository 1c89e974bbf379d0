# Python binding (bindings-python/): `pip install ./bindings-python` into a venv under the shared
# cargo target dir (maturin builds into $(CARGO_TARGET_DIR), so core is not compiled twice), then
# the pytest suite against real topologies. Quick when everything is already installed.
PY_VENV ?= $(CARGO_TARGET_DIR)/py-venv
PYTHON ?= python3
PY_TEST_DEPS := maturin pytest pytest-asyncio pytest-timeout 'celery>=5.4,<6' 'kombu>=5.4,<6' \
	'redis>=8,<9' 'django>=5,<6' 'rq>=2,<3'

TEST_TARGETS += test-python

.PHONY: test-python python-install python-venv

python-venv:
	@test -x $(PY_VENV)/bin/python || $(PYTHON) -m venv $(PY_VENV)
	@$(PY_VENV)/bin/python -c "import maturin, pytest, pytest_asyncio, pytest_timeout, celery, kombu, redis, django, rq" 2>/dev/null \
	  || $(PY_VENV)/bin/python -m pip install -q $(PY_TEST_DEPS)

# With USE_DIST_ARTIFACTS=1 (set by `make test`) it installs the wheel `make dist` built.
ifeq ($(USE_DIST_ARTIFACTS),1)
python-install: python-venv dist
	scripts/dist/use-in-tree.sh python $(PY_VENV)/bin/python
else
python-install: python-venv
	PATH="$(PY_VENV)/bin:$$PATH" $(PY_VENV)/bin/python -m pip install -q --no-build-isolation --force-reinstall --no-deps ./bindings-python
endif

test-python: deps python-install
	cargo build -q -p sentinel-recovery-testkit --bins
	cd bindings-python && $(PY_VENV)/bin/python -m pytest -q --timeout 120 tests
