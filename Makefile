# mcpgate — build, run and test.
#
#   make run     build and start the gateway on examples/demo.toml
#   make check   install what the tests need, then run every test
#   make fuzz    run every fuzz target for FUZZTIME (default 10m) each
#                (make check runs make fuzz-quick: a few seconds each)
#   make install install into $(DESTDIR)$(PREFIX) (default /usr), /etc/mcpgate
#                and systemd's directories
#   make deb     build dist/mcpgate_<version>_<arch>.deb
#   make man     build the manual pages into man/build/
#   make bench   mcpgate beside the floor and the Node gateways (BENCHMARKS.md)

GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X github.com/mcpgate/mcpgate/internal/daemon.Version=$(VERSION) \
             -X github.com/mcpgate/mcpgate/internal/ctl.Version=$(VERSION)
BIN       := bin
DIST      ?= dist

# Installation directories, GNU style; DESTDIR stages an installation.
# /etc/mcpgate is where mcpgated looks by default, whatever the PREFIX.
PREFIX     ?= /usr
bindir     ?= $(PREFIX)/bin
libexecdir ?= $(PREFIX)/libexec
datadir    ?= $(PREFIX)/share
mandir     ?= $(datadir)/man
sysconfdir ?= /etc
# systemd's directories as systemd.pc names them (on Debian bookworm
# /lib/systemd/system, /usr/lib/sysusers.d, /usr/lib/tmpfiles.d; on trixie
# all under /usr/lib). The package ships its units in /usr/lib/systemd/system
# whatever the build host says (packaging/deb/mkdeb.sh).
systemd_dir     = $(or $(shell pkg-config --variable=$(1) systemd 2>/dev/null),$(2))
SYSTEMDUNITDIR ?= $(call systemd_dir,systemdsystemunitdir,/usr/lib/systemd/system)
SYSUSERSDIR    ?= $(call systemd_dir,sysusersdir,/usr/lib/sysusers.d)
TMPFILESDIR    ?= $(call systemd_dir,tmpfilesdir,/usr/lib/tmpfiles.d)

# Release binaries, the ones install and the package ship. They are linked
# dynamically against glibc on purpose: lintian rejects statically linked
# binaries (statically-linked-binary, an error, is what CGO_ENABLED=0
# gives), and the external linker adds what its hardening checks look for:
# PIE, RELRO and BIND_NOW; the C parts of the runtime are compiled with
# Debian's hardening flags. -s -w leaves out the symbol table and DWARF
# (unstripped-binary-or-object is an error too), and strip removes the
# .comment and .note sections the C toolchain adds, as dh_strip would. The
# package's libc6 dependency is computed by dpkg-shlibdeps from the symbol
# versions the binaries use.
RELEASE_LDFLAGS := $(LDFLAGS) -s -w -linkmode=external -extldflags '-Wl,-z,relro,-z,now'
RELEASE_CGO     := CGO_ENABLED=1 CGO_CPPFLAGS='-D_FORTIFY_SOURCE=2' CGO_CFLAGS='-O2 -fstack-protector-strong'
RELEASE   ?= $(BIN)/release

MAN_PAGES := $(patsubst man/%.scd,man/build/%,$(wildcard man/*.scd))

.PHONY: all build run check test test-deps vet units conformance telemetry otelcol e2e e2e-prepare e2e-run e2e-roots bench bench-quick bench-ab \
        bench-micro bench-build bench-peers bench-scaleout clean fuzz fuzz-quick \
        build-release man install install-bin install-systemd install-dbus \
        install-man install-config deb deb-version

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/mcpgated ./cmd/mcpgatectl ./cmd/mcpgate-backend-exec
	$(GO) build -trimpath -o $(BIN)/mcpgate-demoserver ./examples/demoserver

run: build
	@./$(BIN)/mcpgated --check-config --config examples/demo.toml >/dev/null
	@echo "mcpgate: serving the demo backend at http://127.0.0.1:7431/mcp"
	@echo "try it:  examples/try.sh    (initialize, list the tools, call demo__add)"
	exec ./$(BIN)/mcpgated --config examples/demo.toml

# check runs everything CI runs. Tests that need root, the network-free
# npm servers, Node 22 or a booted container are part of it.
# Under check, a test whose prerequisites are missing fails instead of
# skipping (testutil.Unavailable): everything has just been installed.
# The tests leave much of the 2 cores idle, waiting on processes,
# sockets and the network, so check fills the gaps: what the e2e tests
# need (e2e-prepare: the OpenTelemetry Collector of make telemetry first,
# then the roots, whose cold build mostly waits on Debian's mirror, and the
# packages) is made beside the other tests, under nice; make telemetry
# waits for the collector's build if it is still running;
# the fuzz targets, bounded by executions, not time, run beside the e2e
# tests under nice 19, which leaves the CPU to them whenever they want it.
# The background job's output is in $(BIN)/e2e-prepare.log and
# $(BIN)/fuzz-quick.log, shown once it is done.
export MCPGATE_TEST_STRICT
check:
	$(MAKE) MCPGATE_TEST_STRICT=1 test-deps
	@mkdir -p $(BIN) && { nice -n 10 $(MAKE) --no-print-directory e2e-prepare >$(BIN)/e2e-prepare.log 2>&1 & bg=$$!; }; \
	$(MAKE) MCPGATE_TEST_STRICT=1 vet test bench-quick units conformance telemetry; fgstatus=$$?; \
	wait $$bg; bgstatus=$$?; cat $(BIN)/e2e-prepare.log; \
	[ $$bgstatus = 0 ] || echo "check: make e2e-prepare failed; see above"; \
	[ $$fgstatus = 0 ] && [ $$bgstatus = 0 ]
	@{ nice -n 19 $(MAKE) --no-print-directory fuzz-quick >$(BIN)/fuzz-quick.log 2>&1 & bg=$$!; }; \
	$(MAKE) MCPGATE_TEST_STRICT=1 e2e-run; fgstatus=$$?; \
	wait $$bg; bgstatus=$$?; cat $(BIN)/fuzz-quick.log; \
	[ $$bgstatus = 0 ] || echo "check: make fuzz-quick failed; see above"; \
	[ $$fgstatus = 0 ] && [ $$bgstatus = 0 ]

test-deps:
	packaging/ci/deps.sh

vet:
	$(GO) vet ./...
	cd bench && $(GO) vet ./...
	@test -z "$$(gofmt -l cmd internal examples man packaging systemd bench)" || (gofmt -l cmd internal examples man packaging systemd bench; echo "gofmt: files above need formatting"; exit 1)

# The tests of resident memory run again without the race detector, whose
# shadow memory counts in the resident size (they skip under -race).
test:
	$(GO) test -race -count=1 -timeout 20m ./...
	$(GO) test -count=1 -run 'ResidentOnce' ./internal/jsonrpc

# units checks systemd/ with systemd-analyze verify and security (both run
# in test too, silently) and prints mcpgate.service's exposure score.
units:
	$(GO) test -count=1 -v -run '^(TestVerify|TestSecurity)$$' ./systemd

conformance:
	MCPGATE_CONFORMANCE=1 $(GO) test -count=1 -v -timeout 10m -run 'TestConformance|TestClients2026' ./internal/conformance

# telemetry runs the OpenTelemetry tests against a real collector
# (internal/itest/collector_test.go), the one otelcol builds from the Go
# module proxy and caches in /var/cache/mcpgate-test (packaging/ci/otelcol.sh);
# with -race, as make test builds the package, so its build is reused.
telemetry:
	MCPGATE_OTELCOL="$$(packaging/ci/otelcol.sh)" $(GO) test -race -count=1 -v -timeout 10m -run 'TestCollector' ./internal/itest

otelcol:
	@packaging/ci/otelcol.sh >/dev/null

# e2e runs the container tests (internal/e2e) on each Debian release of
# E2E_RELEASES, the runs side by side (e2e-run, packaging/e2e/suite.sh),
# after e2e-prepare: each release's cached root (e2e-roots,
# packaging/e2e/mkroot.sh), one build of the packages for every test and
# both runs (MCPGATE_DEB=path.deb tests a package built elsewhere), the
# packages the upgrade test starts from (packaging/e2e/upgrade-from.sh,
# cached) and the e2e test binary. Both runs share the host's Chromium.
E2E_DIST     := $(BIN)/e2e
E2E_RELEASES ?= bookworm trixie
e2e: e2e-prepare
	@$(MAKE) --no-print-directory e2e-run

e2e-prepare: otelcol e2e-roots
	@if [ -z "$(MCPGATE_DEB)" ]; then \
		rm -rf $(E2E_DIST) && mkdir -p $(E2E_DIST) && \
		$(MAKE) --no-print-directory deb DIST=$(E2E_DIST) RELEASE=$(E2E_DIST)/release >$(E2E_DIST)/make-deb.log 2>&1 || \
		{ tail -30 $(E2E_DIST)/make-deb.log; echo "e2e: make deb failed; its log is $(E2E_DIST)/make-deb.log"; exit 1; }; \
	fi
	@mkdir -p $(E2E_DIST) && MAKE="$(MAKE)" packaging/e2e/upgrade-from.sh >$(E2E_DIST)/upgrade-from
	$(GO) test -c -o $(E2E_DIST)/e2e.test ./internal/e2e

e2e-run:
	@MCPGATE_E2E=1 MCPGATE_DEB="$(or $(MCPGATE_DEB),$$(ls $(CURDIR)/$(E2E_DIST)/mcpgate_*.deb))" \
		MCPGATE_E2E_UPGRADE_FROM="$$(cat $(E2E_DIST)/upgrade-from)" packaging/e2e/suite.sh $(E2E_DIST) $(E2E_RELEASES)

e2e-roots:
	@for r in $(E2E_RELEASES); do packaging/e2e/mkroot.sh --suite=$$r >/dev/null || exit 1; done

# bench runs bench/ (its own Go module): mcpgate, the floor gateway and the
# pinned Node peers side by side in one run, in under 5 minutes on 2 cores.
# It writes bench/results/DATE-HOST.json, bench/plots/*.svg and the
# generated section of BENCHMARKS.md, and ends with the load runs whose CPU
# per call rose by more than 5% since the previous whole run in
# bench/results (bench-scaleout runs first for that). bench-quick is the
# same harness with tiny loads, a smoke test that it works (part of check;
# it asserts no timing). bench-micro runs the Go micro-benchmarks. bench-scaleout (part
# of bench, as root) prints calls per second through HAProxy to three hosts
# in network namespaces against one host directly (internal/scaleout);
# reported, not asserted, and not in BENCHMARKS.md's generated section.
# bench-ab runs this checkout's mcpgated beside the one built from the git
# revision BASELINE (default HEAD: the uncommitted change), in the same
# rounds of the scenarios BENCH_AB_STEPS, and ends with a table of this
# build against the baseline; its results go to $(BIN)/bench-ab.
BENCH_CACHE ?= /var/cache/mcpgate-bench
NODE        ?= node
MCPBENCH     = $(BIN)/mcpbench -bin $(BIN) -npm $(BENCH_CACHE)/npm -node $(NODE) -mcpgate-version $(VERSION)

bench: bench-build bench-peers
	$(MAKE) bench-scaleout
	$(MCPBENCH) -out bench/results -markdown BENCHMARKS.md -plots bench/plots

bench-quick: bench-build bench-peers
	cd bench && $(GO) test -race -count=1 ./...
	$(MCPBENCH) -quick -out $(BIN)/bench-quick
	$(MCPBENCH) -quick -steps load -baseline $(BIN)/mcpgated -out $(BIN)/bench-quick

BASELINE       ?= HEAD
BENCH_AB_STEPS ?= load,shared
bench-ab: bench-build
	rm -rf $(BIN)/baseline && mkdir -p $(BIN)/baseline/src
	git archive --format=tar $(BASELINE) | tar -x -C $(BIN)/baseline/src
	cd $(BIN)/baseline/src && $(GO) build -trimpath -o ../mcpgated ./cmd/mcpgated
	$(MCPBENCH) -steps $(BENCH_AB_STEPS) -baseline $(BIN)/baseline/mcpgated -out $(BIN)/bench-ab

bench-build: build
	cd bench && $(GO) build -trimpath -o ../$(BIN)/ ./cmd/mcpbench ./cmd/benchfloor ./cmd/benchecho ./cmd/mcpgated-pprof

bench-peers:
	MCPGATE_BENCH_CACHE=$(BENCH_CACHE) bench/peers.sh

bench-scaleout:
	$(GO) test -count=1 -run '^$$' -bench Throughput -benchtime 20000x ./internal/scaleout

bench-micro:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/jsonrpc ./internal/journal ./internal/itest

# fuzz runs each fuzz target for FUZZTIME, starting from the corpus
# committed in the package's testdata/fuzz (go test ./... runs that corpus
# too). An input that fails is written there: commit it with the fix.
# An empty FUZZTIME runs each target for its number of executions (a few
# seconds here): that is fuzz-quick, which make check runs. A run bounded
# by time can fail with "context deadline exceeded" and no failing input
# when a worker is starved at the deadline (go.dev/issue/75804); a run
# bounded by executions has no deadline.
FUZZTIME    ?= 10m
FUZZ_TARGETS := internal/jsonrpc:FuzzParse:60000 \
                internal/jsonrpc:FuzzParseAgreesWithEncodingJSON:150000 \
                internal/jsonrpc:FuzzLineReader:8000 internal/jsonrpc:FuzzLookup:300000 \
                internal/jsonrpc:FuzzFind:40000 internal/gateway:FuzzDecidedIsForwarded:20000 \
                internal/front:FuzzHandler:30000 internal/config:FuzzLoad:2500 \
                internal/mcphttp:FuzzEventReader:10000 \
                internal/front:FuzzCheckModern:20000 internal/gateway:FuzzDecorate:20000 \
                internal/access/reqstate:FuzzOpen:30000 internal/jsonrpc:FuzzStringScans:100000 \
                internal/http1:FuzzServeAgreesWithReadRequest:20000 \
                internal/http1:FuzzPlainIsReadRequest:30000 \
                internal/integrity:FuzzServedIsApproved:10000
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; \
		budget='$(FUZZTIME)'; [ -n "$$budget" ] || budget=$${rest#*:}x; \
		echo "fuzz: $$name in ./$$pkg for $$budget"; \
		$(GO) test -run '^$$$$' -fuzz "^$$name\$$" -fuzztime "$$budget" ./$$pkg || exit 1; \
	done
fuzz-quick:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=


build-release:
	$(RELEASE_CGO) $(GO) build -trimpath -buildmode=pie -ldflags "$(RELEASE_LDFLAGS)" -o $(RELEASE)/ ./cmd/mcpgated ./cmd/mcpgatectl ./cmd/mcpgate-backend-exec
	strip --remove-section=.comment --remove-section=.note $(RELEASE)/mcpgated $(RELEASE)/mcpgatectl $(RELEASE)/mcpgate-backend-exec

man: $(MAN_PAGES)

# A page with a table starts with the preprocessor hint '\" t, which tells
# man(1) to run tbl; without it groff 1.23 warns (lintian's groff-message)
# and the table may not render.
man/build/%: man/%.scd
	@mkdir -p man/build
	scdoc < $< > $@.tmp.$$$$ && \
	if grep -q '^\.TS' $@.tmp.$$$$; then \
		{ printf '%s\n' "'\\\" t"; cat $@.tmp.$$$$; } > $@.tbl.$$$$ && mv $@.tbl.$$$$ $@.tmp.$$$$; \
	fi && mv $@.tmp.$$$$ $@

install: install-bin install-systemd install-dbus install-man install-config

install-bin: build-release
	install -d $(DESTDIR)$(bindir)
	install -m 0755 $(RELEASE)/mcpgated $(RELEASE)/mcpgatectl $(DESTDIR)$(bindir)/
	install -d $(DESTDIR)$(libexecdir)/mcpgate
	install -m 0755 $(RELEASE)/mcpgate-backend-exec $(DESTDIR)$(libexecdir)/mcpgate/backend-exec

# The units name /usr/bin and /usr/libexec; another bindir or libexecdir is
# substituted.
install-systemd:
	install -d $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(TMPFILESDIR)
	for u in mcpgate.service mcpgate.socket mcpgate-backend@.service; do \
		sed -e 's|/usr/bin/mcpgate|$(bindir)/mcpgate|g' -e 's|/usr/libexec/mcpgate/|$(libexecdir)/mcpgate/|g' \
			systemd/$$u > $(DESTDIR)$(SYSTEMDUNITDIR)/$$u && \
		chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/$$u || exit 1; \
	done
	install -m 0644 systemd/mcpgate.sysusers $(DESTDIR)$(SYSUSERSDIR)/mcpgate.conf
	install -m 0644 systemd/mcpgate.tmpfiles $(DESTDIR)$(TMPFILESDIR)/mcpgate.conf

# The system bus policy, bus activation, introspection data and polkit
# action of org.mcpgate.Gateway1, and the polkit rule that lets user mcpgate
# manage the backend units. dbus-daemon and polkitd look only under
# /usr/share (and /etc): with another PREFIX, also pass datadir=/usr/share.
install-dbus:
	install -d $(DESTDIR)$(datadir)/dbus-1/system.d $(DESTDIR)$(datadir)/dbus-1/system-services \
		$(DESTDIR)$(datadir)/dbus-1/interfaces $(DESTDIR)$(datadir)/polkit-1/actions \
		$(DESTDIR)$(datadir)/polkit-1/rules.d
	install -m 0644 packaging/dbus/org.mcpgate.Gateway1.conf $(DESTDIR)$(datadir)/dbus-1/system.d/
	sed 's|/usr/bin/mcpgate|$(bindir)/mcpgate|g' packaging/dbus/org.mcpgate.Gateway1.service \
		> $(DESTDIR)$(datadir)/dbus-1/system-services/org.mcpgate.Gateway1.service
	chmod 0644 $(DESTDIR)$(datadir)/dbus-1/system-services/org.mcpgate.Gateway1.service
	install -m 0644 packaging/dbus/org.mcpgate.Gateway1.xml $(DESTDIR)$(datadir)/dbus-1/interfaces/
	install -m 0644 packaging/polkit/org.mcpgate.Gateway1.policy $(DESTDIR)$(datadir)/polkit-1/actions/
	install -m 0644 packaging/polkit/mcpgate.rules $(DESTDIR)$(datadir)/polkit-1/rules.d/50-mcpgate.rules

install-man: man
	for p in $(MAN_PAGES); do \
		install -d $(DESTDIR)$(mandir)/man$${p##*.} && \
		install -m 0644 $$p $(DESTDIR)$(mandir)/man$${p##*.}/ || exit 1; \
	done

# An existing configuration is never overwritten.
install-config:
	install -d $(DESTDIR)$(sysconfdir)/mcpgate/conf.d
	test -e $(DESTDIR)$(sysconfdir)/mcpgate/mcpgate.toml || \
		install -m 0644 packaging/config/mcpgate.toml $(DESTDIR)$(sysconfdir)/mcpgate/
	test -e $(DESTDIR)$(sysconfdir)/mcpgate/conf.d/example.toml || \
		install -m 0644 packaging/config/example.toml $(DESTDIR)$(sysconfdir)/mcpgate/conf.d/

# deb stages `make install` and packs it with dpkg-deb; see
# packaging/deb/mkdeb.sh. DEB_VERSION defaults to one derived from git
# describe (packaging/deb/version.sh).
deb:
	DIST="$(DIST)" DEB_VERSION="$(DEB_VERSION)" packaging/cockpit/mkdeb.sh
	MAKE="$(MAKE)" DIST="$(DIST)" DEB_VERSION="$(DEB_VERSION)" packaging/deb/mkdeb.sh

# deb-version prints the version `make deb` would use.
deb-version:
	@packaging/deb/version.sh

clean:
	rm -rf $(BIN) $(DIST) man/build
