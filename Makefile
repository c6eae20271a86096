# The two set-up commands of the README: `make demo` and `make test`.
# Both install what they need first (Debian packages when root, then the
# Python package with its extras), so they work on a fresh Debian machine.
# The pip step runs only when pyproject.toml, setup.py or the engine's C sources
# changed since the last one (a stamp in the virtual environment says what it installed).
#
# Python packages go into a project virtual environment, .venv/, unless one is
# already active: Debian's own python3 refuses `pip install` outside one (PEP 668).

PYTHON ?= python3
# gcc, libc6-dev and python3-dev build the engine's optional C loops (netesto/engine/native/*/*.c);
# python3-venv gives Debian's python3 its venv module.
APT_PACKAGES = iproute2 iptables iputils-ping ethtool tcpdump iperf3 socat strace sysstat chromium gcc libc6-dev python3-dev python3-venv zlib1g-dev
PYTEST_ARGS ?=
LAB_ARGS ?=
NOTEBOOK ?= notebooks/quickstart.ipynb

ifdef VIRTUAL_ENV
VENV := $(VIRTUAL_ENV)
VENV_NOTE := using the active virtual environment $(VIRTUAL_ENV)
else
VENV := $(CURDIR)/.venv
VENV_NOTE := using the project virtual environment .venv/ (activate another one to use it instead)
endif
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --disable-pip-version-check
EXTRAS := test

# What an install is made from: pip runs again when any of it changes (content, not dates: a
# checkout touches every file) or when the install was made from another tree.
INSTALL_INPUTS := pyproject.toml setup.py $(sort $(wildcard netesto/engine/native/*.h netesto/engine/native/*/*.c \
	netesto/engine/native/*/*.h))
STAMP := $(VENV)/.netesto-install
INSTALL_KEY := $(CURDIR)[$(EXTRAS)] $(shell cat $(INSTALL_INPUTS) | sha256sum | cut -c1-16)

# pip with a line every 15 s while it works: building the C loops or unpacking packages
# can take a minute or more on a busy machine, with nothing from pip in between.
define pip_with_heartbeat
	$(PIP) $(1) & pid=$$!; t=0; \
	while sleep 1; do kill -0 $$pid 2>/dev/null || break; t=$$((t + 1)); \
	  [ $$((t % 15)) -ne 0 ] || echo "  ... pip still at work ($$t s; its last line says which step)"; done; \
	wait $$pid
endef

.PHONY: install apt-packages demo test test-busy lab bench clean

apt-packages:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	  if [ -n "$$missing" ]; then \
	    echo "installing Debian packages:" $$missing; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  fi; \
	fi

install: apt-packages
	@echo "$(VENV_NOTE)"
	@[ -x "$(PY)" ] || { echo "creating $(VENV)"; $(PYTHON) -m venv "$(VENV)"; }
	@if [ "$$(cat "$(STAMP)" 2>/dev/null)" = "$(INSTALL_KEY)" ] && \
	    $(PY) -c 'import sys, netesto; sys.exit(not netesto.__file__.startswith("$(CURDIR)/"))' 2>/dev/null; then \
	  echo "netesto[$(EXTRAS)] is installed from this tree as it is (no pip run; \`rm $(STAMP)\` forces one)"; \
	else \
	  rm -f "$(STAMP)"; \
	  echo "pip: netesto[$(EXTRAS)] from this tree into $(VENV), building the engine's C loops" \
	       "(a first install fetches ~110 packages: minutes)"; \
	  $(call pip_with_heartbeat,-e '.[$(EXTRAS)]') && echo "$(INSTALL_KEY)" > "$(STAMP)"; \
	fi
	@# an editable install leaves out the wheel's data files: nbconvert finds the offline template by name here
	@t="$$($(PY) -c 'import sys; print(sys.prefix)')/share/jupyter/nbconvert/templates"; \
	  mkdir -p "$$t" && ln -sfn "$(CURDIR)/report_templates/nbconvert/netesto-offline" "$$t/netesto-offline"

demo: install
	$(PY) -m netesto demo

# The suite runs on TEST_WORKERS pytest-xdist workers: most tests wait on flows, sleeps and
# subprocesses rather than on the CPU, so 4 workers on this project's 2-vCPU machines take about half
# the serial wall time (README, "Set-up"). Work stealing: the longest tests (sweeps, notebooks,
# ~1 min each) do not queue behind one worker. Then the tests marked `alone` (pyproject.toml) run one
# at a time: they compare a rate or a moment with an earlier one, which the other workers' bursts
# would change on one side only. TEST_WORKERS=0 runs everything in this one process.
# (pytest's exit status 5 is "no test selected": PYTEST_ARGS chose none of one phase's tests.)
TEST_WORKERS ?= 4
# the files holding them: the second phase collects only these (collecting all took a minute under load)
ALONE_FILES = $(shell grep -rl --include='*.py' 'pytest.mark.alone' tests)
# pytest keeps the test modules it rewrote (for its assertions) in __pycache__, unless the environment
# sets PYTHONDONTWRITEBYTECODE: then every worker rewrites every module again (7 s of CPU each)
PYTEST = env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest
# mypy runs beside the parallel phase, its report printed after it: alone it kept one CPU of two busy for
# 23 s (no cache in a fresh clone) while the other waited; not beside the 'alone' tests, which want quiet.
test: install
ifeq ($(TEST_WORKERS),0)
	$(PY) -m mypy netesto
	$(PYTEST) -q -n 0 --durations=25 $(PYTEST_ARGS)
else
	@echo "mypy netesto, beside the tests (its report follows them)"; \
	log=$$(mktemp); $(PY) -m mypy netesto > $$log 2>&1 & m=$$!; \
	$(PYTEST) -q -n $(TEST_WORKERS) --dist worksteal --durations=25 -m "not alone" $(PYTEST_ARGS); a=$$?; \
	wait $$m; t=$$?; echo "mypy netesto:"; cat $$log; rm -f $$log; \
	echo "the tests marked 'alone', one at a time:"; \
	$(PYTEST) -q -n 0 --durations=5 -m alone $(or $(PYTEST_ARGS),$(ALONE_FILES)); b=$$?; \
	[ $$t = 0 ] || exit $$t; for rc in $$a $$b; do [ $$rc = 0 ] || [ $$rc = 5 ] || exit $$rc; done; [ $$a$$b != 55 ]
endif

# `make test` with two CPU-bound busy loops beside it, as on a shared 2-vCPU machine: run it
# before every submission. The loops are started here and killed by their pids, however it ends.
test-busy: install
	@( while :; do :; done ) & b1=$$!; ( while :; do :; done ) & b2=$$!; \
	trap 'kill $$b1 $$b2 2>/dev/null' EXIT INT TERM; \
	echo "two busy loops beside the tests: pids $$b1 $$b2"; \
	$(MAKE) --no-print-directory test

# JupyterLab on the quickstart notebook; installs the 'lab' extra first if JupyterLab is missing.
lab: install
	@$(PY) -c 'import jupyterlab' 2>/dev/null || { \
	  echo "pip: the 'lab' extra (JupyterLab) into $(VENV)"; \
	  $(call pip_with_heartbeat,-e '.[lab]'); }
	$(PY) -m jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS) $(NOTEBOOK)

bench: install
	$(PY) -m bench $(BENCH)

clean:
	rm -rf build *.egg-info .pytest_cache netesto/engine/native/_fastloop*.so netesto/engine/native/_crrloop*.so \
		netesto/engine/native/_rrloop*.so "$(STAMP)"
