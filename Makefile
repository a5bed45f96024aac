# qemu-iobatch: Debian bookworm's QEMU 7.2 plus our I/O batching series.
# See README.md.  Everything is built under build/; nothing is installed
# outside it except the Debian packages of 'make deps'.

JOBS ?= $(shell nproc)
PREFIX ?= /usr/local

export JOBS
# Let ccache share objects between clones of this repo in other directories
# (CI builds in a fresh clone): paths are hashed relative to the checkout.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := true

# $(call build-all,NAME): everything in build/NAME, for the test suites,
# which need the unit tests, qtests and iotests binaries too.
build-all = ninja -C build/$(1) -j $(JOBS) >build/$(1).all.log || \
	{ tail -n 40 build/$(1).all.log; exit 1; }

.PHONY: all setup deps fetch base fork build tree export check-patches check-bisect \
	test test-base tree-build test-tree smoke vblk-load bench run install clean distclean help \
	deps-deb deb test-deb check-update fuzz fuzz-build fuzz-planted profile

all: build

help:
	@echo 'make run            set up, build both, run the quick benchmark (make bench)'
	@echo 'make bench          base against fork; BENCHFLAGS=--full for the matrix'
	@echo 'make profile        where the IOThread'"'"'s CPU goes, base against fork (perf)'
	@echo 'make smoke          the fork starts and moves data in each aio mode'
	@echo 'make test           set up, build the fork, run its tests'
	@echo 'make build          both builds: build/base (unpatched), build/fork'
	@echo 'make tree           a git tree of the fork in tree/ to edit'
	@echo 'make export         write tree/ back to patches/'
	@echo 'make check-patches  series applies, checkpatch.pl, Signed-off-by'
	@echo 'make check-bisect   every prefix of the series builds, passes unit tests'
	@echo 'make install PREFIX=DIR   install the fork'
	@echo 'make deb            Debian packages of the fork in build/deb (docs/install.md)'
	@echo 'make deps-deb       install the build dependencies of make deb'
	@echo 'make test-deb       install build/deb, test it, put Debian'"'"'s packages back'
	@echo 'make check-update   newer Debian qemu than base.pin? does the series apply?'
	@echo 'make fuzz           fuzz the virtio-blk device, FUZZ_SECONDS per target (docs/fuzzing.md)'
	@echo 'make fuzz-planted   every fuzz target must fail on a build with planted crashes'

deps:
	scripts/deps.sh

fetch: deps
	scripts/fetch-base.sh

base: fetch
	scripts/build.sh base build/src/base

fork: fetch
	scripts/fork-src.sh
	scripts/build.sh fork build/src/fork

# The developer tree of 'make tree', built as it is into build/tree; test it
# with 'make test-tree'.
tree-build:
	scripts/build.sh tree tree

build: base fork

setup: build

tree: fetch
	scripts/tree.sh

export:
	scripts/export.sh

check-patches: fetch
	scripts/check-patches.sh

# Every prefix of the series builds and passes the unit tests (slow: one
# incremental build per patch, in build/bisect).
check-bisect: fetch
	scripts/check-bisect.sh

# The fork's tests (tests/run.py); the whole tree is built first, since the
# suites need the unit tests, qtests and iotests binaries.  The fuzzing build
# and the unpatched base, which only the last suites need (the fuzzing smoke
# run; the hostile driver and the soak on the base, for comparison), are
# built beside the first suites, at low priority.
test: fork check-patches
	$(call build-all,fork)
	python3 -m unittest -q tests/test_run.py
	python3 tests/run.py --build fork --beside fuzz-build --beside base \
	    --base base --json build/test-results.json \
	    --summary build/test-summary.txt $(TESTFLAGS)

# The same suites on the unpatched base, for comparison.
test-base: base
	$(call build-all,base)
	python3 tests/run.py --build base --json build/test-results-base.json $(TESTFLAGS)

test-tree: tree-build
	$(call build-all,tree)
	python3 tests/run.py --build tree $(TESTFLAGS)

# The guest-less virtio-blk load generator (docs/vblk-load.md).
vblk-load:
	$(MAKE) -C bench/vblk-load

smoke: fork
	python3 tests/smoke.py build/fork

# Coverage-guided fuzzing of the virtio-blk device (docs/fuzzing.md): the
# fork built with clang, libFuzzer, ASan and UBSan in build/fuzz/qemu, then
# each virtio-blk target for FUZZ_SECONDS (default 60); corpora and findings
# in build/fuzz/.
fuzz-build: fetch
	scripts/fork-src.sh
	scripts/fuzz-build.sh

fuzz: fuzz-build
	scripts/fuzz.sh

# The fuzz run cannot hide a crash: every target, run on a build with
# planted crashes (tests/fuzz/planted-crash.patch, never in the series),
# must fail (docs/fuzzing.md).  A build in build/planted, then 30 s a target.
fuzz-planted: fetch
	scripts/fork-src.sh
	scripts/fuzz-planted.sh

# Base against fork, side by side (docs/benchmarks.md): 5-8 minutes,
# BENCHFLAGS=--full for the whole matrix (1.5-4 hours).  Results in
# build/bench/ (bench.md, bench.json, plots).
bench: build vblk-load
	python3 bench/run.py $(BENCHFLAGS)

run: bench

# Where the IOThread's CPU goes per request, base against fork (perf, one
# tmpfs cell; PROFILEFLAGS, e.g. --backend tmpfs-io_uring --rounds 5).
# Results in build/profile/profile.md.
profile: build vblk-load
	python3 bench/profile.py $(PROFILEFLAGS)

install: fork
	scripts/install.sh build/fork $(PREFIX)

# The fork as Debian packages (docs/install.md): Debian's packaging of the
# pinned source with the series as quilt patches, x86 only.  About 33 minutes
# on 2 cores, cold; not part of 'make test'.
deps-deb:
	scripts/deps-deb.sh

deb: deps-deb
	scripts/deb.sh

# Installs build/deb on this machine, tests it, then puts back the packages
# that were there before (TESTDEBFLAGS=--keep leaves the fork installed).
test-deb: deb
	python3 tests/deb.py $(TESTDEBFLAGS)

# Is there a newer bookworm/bookworm-security qemu, and does the series apply
# to it?  CHECKUPDATEFLAGS=--pin moves base.pin to it (docs/patch-workflow.md).
check-update:
	scripts/check-update.sh $(CHECKUPDATEFLAGS)

clean:
	rm -rf build/base build/fork

distclean:
	rm -rf build .cache
