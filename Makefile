# qemu-iobatch: Debian bookworm's QEMU 7.2 plus our I/O batching series.
# See README.md.  Everything is built under build/; nothing is installed
# outside it except the Debian packages of 'make deps'.

JOBS ?= $(shell nproc)
PREFIX ?= /usr/local
# Build the fork from another tree, e.g. FORK_SRC=tree after 'make tree'.
FORK_SRC ?= build/src/fork

export JOBS

.PHONY: all setup deps fetch base fork build tree export check-patches \
	test test-base smoke run install clean distclean help

all: build

help:
	@echo 'make run            set up, build, and run the default smoke job'
	@echo 'make test           set up, build the fork, run its tests'
	@echo 'make build          both builds: build/base (unpatched), build/fork'
	@echo 'make tree           a git tree of the fork in tree/ to edit'
	@echo 'make export         write tree/ back to patches/'
	@echo 'make check-patches  series applies, checkpatch.pl, Signed-off-by'
	@echo 'make install PREFIX=DIR   install the fork'

deps:
	scripts/deps.sh

fetch: deps
	scripts/fetch-base.sh

base: fetch
	scripts/build.sh base build/src/base

fork: fetch
	@if [ "$(FORK_SRC)" = build/src/fork ]; then scripts/fork-src.sh; fi
	scripts/build.sh fork $(FORK_SRC)

build: base fork

setup: build

tree: fetch
	scripts/tree.sh

export:
	scripts/export.sh

check-patches: fetch
	scripts/check-patches.sh

# The fork's tests (tests/run.py); the whole tree is built first, since the
# suites need the unit tests, qtests and iotests binaries.
test: fork check-patches
	ninja -C build/fork -j $(JOBS) >build/fork.all.log || \
	    { tail -n 40 build/fork.all.log; exit 1; }
	python3 tests/run.py --build fork --json build/test-results.json $(TESTFLAGS)

# The same suites on the unpatched base, for comparison.
test-base: base
	ninja -C build/base -j $(JOBS) >build/base.all.log || \
	    { tail -n 40 build/base.all.log; exit 1; }
	python3 tests/run.py --build base --json build/test-results-base.json $(TESTFLAGS)

smoke: fork
	python3 tests/smoke.py build/fork

run: smoke

install: fork
	scripts/install.sh build/fork $(PREFIX)

clean:
	rm -rf build/base build/fork

distclean:
	rm -rf build .cache
