# The two set-up commands of the README: `make demo` and `make test`.
# Both install what they need first (Debian packages when root, then the
# Python package with its extras), so they work on a fresh Debian machine.

PYTHON ?= python3
# gcc, libc6-dev and python3-dev build the engine's optional C loops (netesto/traffic/_fastloop.c)
APT_PACKAGES = iproute2 iptables iputils-ping ethtool tcpdump iperf3 sockperf sysstat chromium gcc libc6-dev python3-dev zlib1g-dev
PYTEST_ARGS ?=

.PHONY: install demo test bench clean

install:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	  if [ -n "$$missing" ]; then \
	    echo "installing Debian packages: $$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  fi; \
	fi
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --root-user-action=ignore -e '.[test]'

demo: install
	$(PYTHON) -m netesto demo

test: install
	$(PYTHON) -m pytest -q $(PYTEST_ARGS)

bench: install
	$(PYTHON) -m bench $(BENCH)

clean:
	rm -rf build *.egg-info .pytest_cache netesto/traffic/_fastloop*.so
