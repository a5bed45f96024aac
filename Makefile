# qemu-iobatch: Debian bookworm's QEMU 7.2 plus our I/O batching series.
# See README.md.  Everything is built under build/; nothing is installed
# outside it except the Debian packages of 'make deps' (and what the targets
# marked so in 'make help' install).
#
# 'make' alone prints the help.  Each target's line in it is the '##'
# comment after the target; tests/run.py (suite docs) checks that every
# target has one.

# The line of the fork to work on: a directory of lines/ with its base.pin
# and patches/ (scripts/line.sh).  bookworm (QEMU 7.2) is the default; the
# trixie line (QEMU 10.0) has the targets of LINE_TARGETS (make test builds
# and tests it beside bookworm), and its base build is 'make upstream'.
LINE ?= bookworm
LINES := $(patsubst lines/%/base.pin,%,$(wildcard lines/*/base.pin))
ifeq ($(filter $(LINE),$(LINES)),)
$(error LINE=$(LINE): there is no lines/$(LINE)/base.pin; the lines are: $(LINES))
endif
export LINE
# The targets that work on any line (or on none); with another LINE than
# bookworm, make stops before it runs anything else.
LINE_TARGETS := help fetch tree export check-patches check-update upstream deps \
	clean distclean check-links vblk-load tree-build fork deb deps-deb repo test-deb
ifneq ($(LINE),bookworm)
ifneq ($(filter-out $(LINE_TARGETS),$(MAKECMDGOALS)),)
$(error make $(filter-out $(LINE_TARGETS),$(MAKECMDGOALS)): the bookworm line's only so far, not LINE=$(LINE)'s (issue 33); for LINE=$(LINE): make $(filter-out help deps clean distclean check-links vblk-load upstream,$(LINE_TARGETS)), and make upstream for its base build)
endif
endif

JOBS ?= $(shell nproc)
# make install: a prefix of its own, where the fork's binaries do not shadow
# Debian's QEMU (as /usr/local/bin would, first in PATH); DESTDIR for staging.
PREFIX ?= /opt/qemu-iobatch
DESTDIR ?=
# make deb: where the packages are built, root (a clean root that mmdebstrap
# makes for the build) or host (this machine).
DEB_BUILDER ?= root
# make repo: the line's apt repository (one per line: bookworm's in
# /srv/qemu-iobatch/repo, trixie's in /srv/qemu-iobatch/repo-trixie),
# outside the checkout (hosts point at it, so it must outlive 'make
# distclean'); the directory of the key that signs it
# (made once and kept, root's alone; empty: 'signing' beside REPO_DIR); the
# URI hosts reach it at (empty: file:REPO_DIR, for this host or a copy at
# the same path; or the http(s) URL where it is served).  docs/install.md.
REPO_DIR ?= /srv/qemu-iobatch/repo$(if $(filter-out bookworm,$(LINE)),-$(LINE))
REPO_KEY_DIR ?=
REPO_URI ?=

export JOBS
# What the suites that make test runs on another line than bookworm need
# besides the binaries (tests/run.py: qtest-trixie, chaos-trixie)
LINE_TEST_PRODUCTS = tests/qtest/qos-test $(addprefix tests/qtest/,drive_del-test \
	hd-geo-test cdrom-test device-plug-test fuzz-virtio-scsi-test) \
	tests/unit/test-block-iothread
# Let ccache share objects between clones of this repo in other directories
# (CI builds in a fresh clone): paths are hashed relative to the checkout.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := true

# $(call build-all,NAME): everything in build/NAME, for the test suites,
# which need the unit tests, qtests and iotests binaries too.
build-all = ninja -C build/$(1) -j $(JOBS) >build/$(1).all.log || \
	{ tail -n 40 build/$(1).all.log; exit 1; }

.DEFAULT_GOAL := help
.PHONY: all setup deps fetch base fork build tree export check-patches check-bisect \
	test test-full check test-base tree-build test-tree smoke vblk-load bench run install uninstall clean \
	distclean help deps-deb deb repo test-deb check-update fuzz fuzz-build profile \
	debug-build check-links upstream fuzz-planted

##@ Help
help: ## this list (also 'make' alone)
	@echo 'qemu-iobatch: Debian 12'"'"'s QEMU 7.2 with an I/O batching series (README.md).'
	@echo 'LINE=bookworm (the default) or LINE=trixie selects the line of lines/ that'
	@echo 'fetch, tree, export, check-patches, check-update, fork, deb, deps-deb, repo,'
	@echo 'test-deb work on; the others are the bookworm line'"'"'s (make test tests both).'
	@echo 'Targets marked [root] install missing Debian packages with apt-get as root (as'
	@echo 'another user they print the apt-get line and stop); [host] ones change this'
	@echo 'host beyond packages.'
	@awk 'BEGIN { FS = ":.*## " } \
	    /^##@ / { printf "\n%s:\n", substr($$0, 5); next } \
	    /^[a-z][a-z-]*:.*## / { printf "  make %-14s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

##@ Use the fork (docs/install.md)
# The fork as Debian packages: Debian's packaging of the line's pinned source
# with the series as quilt patches, x86 only, built in a clean root of the
# line's release (bookworm, trixie) that mmdebstrap makes for the build
# (DEB_BUILDER=host: on this machine, with make deps-deb's build
# dependencies).  Not part of 'make test'.
deb: deps-deb ## [root] Debian packages of the fork in build/deb (LINE=trixie: build/trixie/deb), built in a clean root
	DEB_BUILDER='$(DEB_BUILDER)' scripts/deb.sh

# Signs the repository, adds qemu-iobatch-apt to it and installs that here.
repo: deb ## [root][host] add build/deb to the line's signed apt repository REPO_DIR (/srv/qemu-iobatch/repo); a host of the line's release uses it
	REPO_DIR='$(REPO_DIR)' REPO_KEY_DIR='$(REPO_KEY_DIR)' REPO_URI='$(REPO_URI)' scripts/repo.sh

# install writes a manifest of what it put there (PREFIX/share/qemu-iobatch/
# manifest), which uninstall reads; it overwrites no file it did not install.
install: fork ## [root][host] the in-tree fork's binaries and data into PREFIX (default /opt/qemu-iobatch)
	DESTDIR='$(DESTDIR)' scripts/install.sh build/fork '$(PREFIX)'

uninstall: ## [host] remove exactly what make install put into PREFIX (by its manifest)
	DESTDIR='$(DESTDIR)' scripts/install.sh --uninstall '$(PREFIX)'

##@ Build
all: build ## the same as make build
build: base fork ## [root] both builds: build/base (unpatched), build/fork
setup: build ## [root] the same as make build

deps: ## [root] install the Debian packages that building and testing need
	scripts/deps.sh

fetch: deps ## [root] download and verify the line's pinned Debian source (lines/LINE/base.pin), unpack it (build/src/base)
	scripts/fetch-base.sh

base: fetch ## [root] the unpatched base in build/base
	scripts/build.sh base build/src/base

fork: fetch ## [root] the fork (base + lines/LINE/patches/series) in build/fork (LINE=trixie: build/trixie/fork)
	scripts/fork-src.sh
ifeq ($(LINE),bookworm)
	scripts/build.sh fork build/src/fork
else
	EXTRA_PRODUCTS="$(LINE_TEST_PRODUCTS)" \
	    scripts/upstream.sh --build $(LINE)/fork build/$(LINE)/src/fork
endif

# The fork with the debug check of deferred calls (a blocking aio_poll()
# with calls queued aborts), in build/dbg, for the suite "debug" of
# 'make test': the unit tests and the virtio-blk and virtio-scsi qtests.
debug-build: fetch ## [root] the fork with the deferred-call debug check in build/dbg (suite debug)
	scripts/fork-src.sh
	scripts/debug-build.sh

# The fork built with clang, libFuzzer, ASan and UBSan in build/fuzz/qemu
# (docs/fuzzing.md).
fuzz-build: fetch ## [root] the fork for fuzzing (clang, libFuzzer, ASan, UBSan) in build/fuzz/qemu
	scripts/fork-src.sh
	scripts/fuzz-build.sh

# The guest-less virtio-blk load generator (docs/vblk-load.md).
vblk-load: ## the virtio-blk load generator without a guest, bench/vblk-load
	$(MAKE) -C bench/vblk-load

deps-deb: ## [root] what make deb needs: mmdebstrap (DEB_BUILDER=host: ~230 build dependencies)
	DEB_BUILDER='$(DEB_BUILDER)' scripts/deps-deb.sh

clean: ## remove build/base and build/fork
	rm -rf build/base build/fork

distclean: ## remove build/ and .cache/ (everything built and downloaded)
	rm -rf build .cache

##@ Test
# The fork's tests (tests/run.py); the whole tree is built first, since the
# suites need the unit tests, qtests and iotests binaries.  The debug
# build (and for test-full the fuzzing build), which only the last suites
# need, are built beside the first suites, at low priority.  test-full
# adds the fuzzing smoke run, the iotests for raw images and the
# unpatched base, built beside them too, with the hostile driver and the
# guest soak on it for comparison (suites chaos-base, soak-base): too
# much for CI's time on a new machine, so CI (.ci/run) runs make test
# (docs/testing.md).
RUN_TESTS = python3 tests/run.py --build fork --beside fuzz-build \
	    --beside debug-build --json build/test-results.json \
	    --summary build/test-summary.txt
# make test runs qemu-iotests for qcow2 in the three aio modes, all three
# at once (they wait far more than they compute); test-full for raw too,
# two at a time (docs/testing.md, "make test-full")
TEST_IOTESTS = --iotests qcow2-threads --iotests qcow2-native --iotests qcow2-io_uring \
	    --iotest-jobs 3
# Both run the block qtests, the hostile driver and the guest cases that
# need 10.0 on the trixie line's fork, built beside the suites
TEST_TRIXIE = --beside trixie-fork --trixie build/trixie/fork
# make test leaves out the fuzzing smoke run, and with it the fuzzing
# build: beside the other cold builds it took a cold .ci/run past 90
# minutes (docs/testing.md, "make test-full")
TEST_LEAVE_OUT = --no-suite fuzz
# The harness's own unit tests, run first by both
HARNESS_TESTS = python3 -m unittest -q tests/test_run.py tests/test_record.py tests/test_deb.py \
	    tests/test_postmortem.py tests/guest/test_unique_data.py

test: fork check-patches ## [root] build the fork and run its test suites (about an hour; TESTFLAGS)
	$(MAKE) --no-print-directory check-patches LINE=trixie
	$(call build-all,fork)
	$(HARNESS_TESTS)
	$(RUN_TESTS) $(TEST_IOTESTS) $(TEST_TRIXIE) $(TEST_LEAVE_OUT) $(TESTFLAGS)

test-full: fork check-patches ## [root] make test, the iotests for raw too, and the hostile driver and the soak on the base
	$(MAKE) --no-print-directory check-patches LINE=trixie
	$(call build-all,fork)
	$(HARNESS_TESTS)
	$(RUN_TESTS) $(TEST_TRIXIE) --beside base --base base $(TESTFLAGS)

check: test ## [root] the same as make test

# The same suites on the unpatched base, for comparison.
test-base: base ## [root] the same suites on the unpatched base
	$(call build-all,base)
	python3 tests/run.py --build base --json build/test-results-base.json $(TESTFLAGS)

smoke: fork ## [root] quick check: the fork starts and moves data in each aio mode
	python3 tests/smoke.py build/fork

# Installs the fork's packages from a repository of its own
# (build/test-deb/repo, signed with a test key) on this machine, tests them,
# upgrades to a rebuild, goes back to Debian's, then puts back what was
# there before (TESTDEBFLAGS=--keep leaves the fork installed).  For a line
# of another Debian release than this host's (LINE=trixie on bookworm), the
# same in a clean root of that release, and the host keeps its QEMU.
test-deb: deb ## [root][host] REPLACES THIS HOST'S QEMU: test the packages (build VM only; LINE=trixie: in a trixie root)
	python3 tests/deb.py $(TESTDEBFLAGS)

check-links: ## every relative link and #anchor in README.md and docs/ resolves
	python3 scripts/check-links.py

fuzz: fuzz-build ## [root] fuzz the virtio-blk device, FUZZ_SECONDS per target (docs/fuzzing.md)
	scripts/fuzz.sh

# The fuzz run cannot hide a crash: every target, run on a build with
# planted crashes (tests/fuzz/planted-crash.patch, never in the series),
# must fail (docs/fuzzing.md).  A build in build/planted, then 30 s a target.
fuzz-planted: fetch ## [root] every fuzz target must fail on a build with planted crashes
	scripts/fork-src.sh
	scripts/fuzz-planted.sh

##@ Measure (docs/benchmarks.md)
# Base against fork, side by side: 5-8 minutes, BENCHFLAGS=--full for the
# whole matrix (1.5-4 hours).  Results in build/bench/ (bench.md,
# bench.json, plots).
bench: build vblk-load ## [root] base against fork; BENCHFLAGS=--full for the matrix, --upstream adds 10.0
	python3 bench/run.py $(BENCHFLAGS)

run: bench ## [root] set up, build both, run the quick benchmark (make bench)

# Where the IOThread's CPU goes per request, base against fork (perf, one
# tmpfs cell; PROFILEFLAGS, e.g. --backend tmpfs-io_uring --rounds 5).
# Results in build/profile/profile.md.
profile: build vblk-load ## [root] where the IOThread's CPU goes, base against fork (perf)
	python3 bench/profile.py $(PROFILEFLAGS)

# The trixie line's base build: Debian trixie's QEMU 10.0 as pinned in
# lines/trixie/base.pin (fetched and verified as make fetch does, into
# build/trixie/src/base), with scripts/build.sh's line for 10.x (that of base
# and fork less the 7.2-only --with-git-submodules=ignore) plus
# --disable-install-blobs and --disable-werror (scripts/upstream.sh says
# why), in build/upstream: about 25 minutes on 2 cores,
# so not part of 'make run'; once it is built, 'make bench
# BENCHFLAGS=--upstream' adds it (bench/run.py stops and says to run 'make
# upstream' when it is missing).  The suite "configure" of make test checks
# that line against 10.0's configure.
upstream: deps ## [root] the trixie line's pinned base, Debian's QEMU 10.0, in build/upstream (~25 min)
	scripts/upstream.sh

##@ Work on the series (docs/patch-workflow.md)
tree: fetch ## [root] a git tree of the line's fork to edit: tree/ (LINE=trixie: tree-trixie/)
	scripts/tree.sh

export: ## write the line's tree back to its patches/ (lines/LINE/patches/)
	scripts/export.sh

check-patches: fetch ## [root] the line's series applies, checkpatch.pl, Signed-off-by
	scripts/check-patches.sh

# Every prefix of the series builds and passes the unit tests (slow: one
# incremental build per patch, in build/bisect).
check-bisect: fetch ## [root] every prefix of the series builds and passes the unit tests
	scripts/check-bisect.sh

# The developer tree of 'make tree', built as it is into build/tree
# (LINE=trixie: tree-trixie/ into build/trixie-tree, configured as make
# upstream configures stock 10.0).
tree-build: ## build tree/ as it is into build/tree (LINE=trixie: tree-trixie/ into build/trixie-tree)
ifeq ($(LINE),bookworm)
	scripts/build.sh tree tree
else
	scripts/upstream.sh --build $(LINE)-tree tree-$(LINE)
endif

test-tree: tree-build ## [root] the test suites on build/tree
	$(call build-all,tree)
	python3 tests/run.py --build tree $(TESTFLAGS)

# For every line (or the line given as LINE=... on the command line or in
# the environment): is there a newer qemu in its suites (bookworm,
# bookworm-updates, bookworm-security; the same of trixie), and does its
# series apply to it?  CHECKUPDATEFLAGS=--pin moves the line's base.pin to it
# (docs/patch-workflow.md).
check-update: ## a newer Debian qemu than each line's base.pin? does its series apply to it?
	scripts/check-update.sh $(if $(filter command line environment,$(origin LINE)),--line $(LINE)) $(CHECKUPDATEFLAGS)
