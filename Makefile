# weir's developer entry points. `make` alone lists them; each target's
# description is its `## ` comment, so `make help` cannot drift from this file.
# Needs GNU make, bash and the Go toolchain named in go.mod.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO ?= go
# Stamp the binary with the git commit that `weir version` prints (the
# environment may set GOFLAGS=-buildvcs=false). Override with GOBUILDFLAGS=
# where git cannot read the checkout.
GOBUILDFLAGS ?= -buildvcs=auto
# What `make bench` and `make fuzz` run: package pattern, -bench regexp, runs.
PKG ?= ./...
BENCH ?= .
COUNT ?= 5
# How long `make fuzz` runs each Fuzz* target; `make test` under CI=true
# fuzzes each for CI_FUZZTIME.
FUZZTIME ?= 30s
CI_FUZZTIME ?= 15s

# Where `make cluster` keeps the local cluster's data and logs, and how many
# brokers it starts.
CLUSTER_DIR ?= ./local-cluster
BROKERS ?= 3

.PHONY: help build run cluster test deps bench fuzz generate plugins vet clean

help: ## list the targets (the default)
	@awk 'BEGIN { FS = ":.*## " } /^[a-zA-Z_-]+:.*## / { printf "  %-10s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
	@echo "Variables: GO=$(GO) PKG=$(PKG) BENCH=$(BENCH) COUNT=$(COUNT) FUZZTIME=$(FUZZTIME) CLUSTER_DIR=$(CLUSTER_DIR) BROKERS=$(BROKERS)"

build: ## build the CLI into bin/weir
	$(GO) build $(GOBUILDFLAGS) -o bin/weir ./cmd/weir

run: build ## build, then run the quick experiment preset (disk probe + codec x flush matrix, < 3 min)
	bin/weir run --preset quick

# cluster: ZooKeeper (Debian's zookeeper package) and BROKERS `weir broker`
# processes on 127.0.0.1 (Kafka ports 9092 up, metrics 9644 up), with their
# data and logs in CLUSTER_DIR (not ./cluster, which is the cluster/ source
# tree). They keep running after make returns, until
# `bin/weir cluster down --dir ./local-cluster`; the data stays for the next
# `make cluster` unless down is given --purge.
cluster: build ## build, then start ZooKeeper and 3 brokers on 127.0.0.1:9092-9094 in ./local-cluster (stop: bin/weir cluster down --dir ./local-cluster)
	bin/weir cluster up --dir $(CLUSTER_DIR) --brokers $(BROKERS)

test: deps vet ## install test dependencies, vet, run every test with -race; under CI=true, fuzz too (CI_FUZZTIME each)
	$(GO) test -race -count=1 ./...
	@# The flush-policy conformance suite makes ~40,000 plugin calls per policy: under -race only one
	@# policy runs it through the gRPC shim and the subprocess run skips, so run those without -race here.
	$(GO) test -count=1 -run '^(TestBuiltinsThroughShim|TestExampleFlushPolicyConformance)$$' \
		./plugins/flushpolicy/flushpolicyrpc ./plugins/host
	@if [ "$${CI:-}" = true ]; then $(MAKE) --no-print-directory fuzz FUZZTIME=$(CI_FUZZTIME); fi

# The interop suite (transport/e2e/interop) needs python3-kafka,
# python3-confluent-kafka, nodejs and npm (Debian packages; KafkaJS then
# comes by `npm ci` in its test folder), which deps installs too.
# deps: what the tests need beyond Go, installed only when missing: kcat
# (Debian package), which transport/e2e drives as a real librdkafka client,
# zookeeper (Debian package, 3.8), which cluster/zk's tests run, and burrow
# (Debian package, Burrow 1.2.1), which transport/e2e's TestBurrow runs.
# Installing needs root and apt-get; without them deps says what is missing
# and goes on, and those tests skip (under CI=true they fail instead).
deps: ## install what the tests need beyond Go when missing: kcat, zookeeper, burrow, python3-kafka, python3-confluent-kafka, nodejs, npm (apt-get, as root)
	@missing=""; \
	[ -e /usr/lib/python3/dist-packages/kafka/__init__.py ] || missing="$$missing python3-kafka"; \
	[ -e /usr/lib/python3/dist-packages/confluent_kafka/__init__.py ] || missing="$$missing python3-confluent-kafka"; \
	command -v node >/dev/null || missing="$$missing nodejs"; \
	command -v npm >/dev/null || missing="$$missing npm"; \
	command -v kcat >/dev/null || missing="$$missing kcat"; \
	[ -e /usr/share/java/zookeeper.jar ] || missing="$$missing zookeeper"; \
	command -v Burrow >/dev/null || missing="$$missing burrow"; \
	if [ -z "$$missing" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "== apt-get install$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else \
		echo "make deps: missing and cannot be installed here (needs root and apt-get):$$missing;" \
			"install the Debian packages, or their tests will skip" >&2; \
	fi

bench: ## run benchmarks: PKG=./... BENCH=. COUNT=5 (benchstat-ready output)
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(COUNT) $(PKG)

# fuzz: the packages come from a grep for `func Fuzz` in test files (listing
# every package's tests would compile them all), then `go test -list` names
# the targets. Each target starts from its f.Add seeds and its committed
# corpus, testdata/fuzz/<Target>/ (which plain `go test` runs too); a failure
# leaves its input there. SAVE_CORPUS=1 also copies what the run found
# interesting (Go keeps it in its cache) into testdata/fuzz, to commit.
# Go 1.26's fuzz coordinator can fail a target with a bare "context deadline
# exceeded" at the end of -fuzztime (golang/go#75804): that, with no failing
# input written, is reported and not counted as a failure.
fuzz: ## run every Fuzz* target in PKG for FUZZTIME each (default 30s), one after another; SAVE_CORPUS=1 keeps new inputs
	@dirs=$$({ grep -rl --include='*_test.go' '^func Fuzz' $(patsubst %/...,%,$(PKG)) || true; } | xargs -r -n1 dirname | sort -u); \
	[ -n "$$dirs" ] || { echo "make fuzz: no Fuzz* targets in $(PKG)"; exit 0; }; \
	cache=$$($(GO) env GOCACHE)/fuzz; \
	for pkg in $$($(GO) list $$(printf './%s ' $$dirs | sed 's#\./\./#./#g')); do \
		dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
		for target in $$($(GO) test -list '^Fuzz' $$pkg | sed -n 's/^\(Fuzz[A-Za-z0-9_]*\)$$/\1/p'); do \
			echo "== $$pkg $$target ($(FUZZTIME))"; \
			before=$$({ ls "$$dir/testdata/fuzz/$$target" 2>/dev/null || true; } | wc -l); \
			log=$$(mktemp); \
			if ! $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$pkg 2>&1 | tee "$$log"; then \
				after=$$({ ls "$$dir/testdata/fuzz/$$target" 2>/dev/null || true; } | wc -l); \
				if grep -q '^    context deadline exceeded$$' "$$log" && [ "$$after" = "$$before" ]; then \
					echo "== $$target: Go's fuzz coordinator race at the -fuzztime deadline (golang/go#75804, fixed in Go 1.27); no failing input was written, so not a failure"; \
				else rm -f "$$log"; exit 1; fi; \
			fi; \
			rm -f "$$log"; \
			if [ "$(SAVE_CORPUS)" = 1 ] && [ -d "$$cache/$$pkg/$$target" ]; then \
				mkdir -p "$$dir/testdata/fuzz/$$target"; \
				cp -n "$$cache/$$pkg/$$target"/* "$$dir/testdata/fuzz/$$target/"; \
			fi; \
		done; \
	done

# generate: the plugin protocols' Go code (plugins/*/*pb) comes from protoc,
# Debian package protobuf-compiler (the committed code used 3.21.12); the Go
# generators are pinned and built by plugins/pluginrpc/protoc.sh.
generate: ## regenerate generated code (go generate ./...; needs protoc: apt-get install protobuf-compiler)
	@command -v protoc >/dev/null || { echo "make generate: protoc not found: install the Debian package protobuf-compiler" >&2; exit 1; }
	$(GO) generate ./...

plugins: ## build the example plugins and weir-builtins into bin/plugins/
	$(GO) build $(GOBUILDFLAGS) -o bin/plugins/ ./plugins/cmd/weir-codec-s2 ./plugins/cmd/weir-partitioner-keyrange \
		./plugins/cmd/weir-flushpolicy-ratelimit ./plugins/cmd/weir-builtins

vet: ## go vet every package
	$(GO) vet ./...

clean: ## remove build outputs (bin/)
	rm -rf bin
