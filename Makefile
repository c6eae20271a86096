# The two set-up commands of the README: `make demo` and `make test`.
# Both install what they need first (Debian packages when root, then the
# Python package with its extras), so they work on a fresh Debian machine.
#
# Python packages go into a project virtual environment, .venv/, unless one is
# already active: Debian's own python3 refuses `pip install` outside one (PEP 668).

PYTHON ?= python3
# gcc, libc6-dev and python3-dev build the engine's optional C loops (netesto/engine/_*.c);
# python3-venv gives Debian's python3 its venv module.
APT_PACKAGES = iproute2 iptables iputils-ping ethtool tcpdump iperf3 socat strace sysstat chromium gcc libc6-dev python3-dev python3-venv zlib1g-dev
PYTEST_ARGS ?=

ifdef VIRTUAL_ENV
VENV := $(VIRTUAL_ENV)
VENV_NOTE := using the active virtual environment $(VIRTUAL_ENV)
else
VENV := $(CURDIR)/.venv
VENV_NOTE := using the project virtual environment .venv/ (activate another one to use it instead)
endif
PY := $(VENV)/bin/python

.PHONY: install demo test bench clean

install:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	  if [ -n "$$missing" ]; then \
	    echo "installing Debian packages: $$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  fi; \
	fi
	@echo "$(VENV_NOTE)"
	@[ -x "$(PY)" ] || $(PYTHON) -m venv "$(VENV)"
	$(PY) -m pip install --disable-pip-version-check --progress-bar off -e '.[test]'

demo: install
	$(PY) -m netesto demo

test: install
	$(PY) -m mypy netesto
	$(PY) -m pytest -q --durations=25 $(PYTEST_ARGS)

bench: install
	$(PY) -m bench $(BENCH)

clean:
	rm -rf build *.egg-info .pytest_cache netesto/engine/_fastloop*.so netesto/engine/_crrloop*.so \
		netesto/engine/_rrloop*.so
