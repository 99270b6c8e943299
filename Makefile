# quarantine: run `make` or `make help` for the targets.

GO        ?= go
BIN       := bin/quarantine
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
# -buildvcs=false: builds work from a tarball or a checkout without git.
export GOFLAGS ?= -buildvcs=false
# Set in the environment or on the command line, these reach the tests
# (make passes both through): QUARANTINE_BENCH_ROWS (rows the store
# benchmarks seed), the QUARANTINE_TEST_* addresses of services of your
# own (they win over the project's private instances), and CI=true (a
# missing service is then an error instead of a skip).
# The project's private service instances (scripts/services.sh) and the
# variables through which the tests find them:
SERVICES_DIR ?= $(or $(QUARANTINE_SERVICES_DIR),.tools/services)
WITH_SERVICES := . "$(abspath $(SERVICES_DIR))/env.sh" &&

.DEFAULT_GOAL := help

.PHONY: help build image run demo services services-stop test test-race test-isolated lint fmt bench clean

help: ## list the targets
	@echo 'Usage: make TARGET'
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/quarantine
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/quarantine

image: ## build the container image quarantine:$(VERSION) and quarantine:latest (podman or buildah, FROM scratch; scripts/image.sh, docs/deploy.md)
	VERSION='$(VERSION)' ./scripts/image.sh

run: build ## build, then serve on the embedded SQLite default (prints the login URL on first start)
	./$(BIN) serve

demo: build ## the whole loop on the embedded store: the tour (it explains each step), then the demo serving until Ctrl-C
	./$(BIN) demo --tour
	./$(BIN) demo

services: ## start the project's own PostgreSQL, RabbitMQ, NATS, goaws and Alertmanager on private loopback ports, and install the tools the tests run (promtool, Chromium, helm, podman) (scripts/services.sh; never the machine's)
	./scripts/services.sh

services-stop: ## stop the private service instances that `make services` started, and nothing else
	./scripts/services.sh stop

# TIMING_TESTS count arrivals per second at a consumer: make test runs them
# by themselves, after the rest (broker/rabbitmq timingTest).
TIMING_TESTS = ^TestReplayTwoProcesses

test: services ## run every test, uncached (needs services; installs the npm tools of the OpenAPI tests into .tools/node); the API suite runs on both stores
	./scripts/node-tools.sh
	$(WITH_SERVICES) QUARANTINE_TIMING_TESTS=later $(GO) test -count=1 ./...
	$(WITH_SERVICES) QUARANTINE_API_TEST_STORE=postgres $(GO) test -count=1 ./api/
	$(WITH_SERVICES) $(GO) test -count=1 -run '$(TIMING_TESTS)' ./broker/rabbitmq/

test-isolated: ## make test (CI=true) from a fresh clone in a network namespace of its own, where none of the machine's services can be reached (scripts/test-isolated.sh)
	./scripts/test-isolated.sh

test-race: services ## run every test with the race detector, uncached
	./scripts/node-tools.sh
	$(WITH_SERVICES) $(GO) test -race -count=1 ./...

lint: ## gofmt (must list nothing) and go vet
	@out="$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go' 2>/dev/null || find . -name '*.go' -not -path './.tools/*'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

fmt: ## format the Go sources
	gofmt -w $$(git ls-files -co --exclude-standard '*.go' 2>/dev/null || find . -name '*.go' -not -path './.tools/*')

bench: services ## run the benchmarks: stores, collectors vs bare broker drains, peak RSS, replay rate and speed (docs/benchmarks.md)
	$(WITH_SERVICES) $(GO) test -run '^$$' -bench 'Fingerprint' -benchmem .
	$(WITH_SERVICES) $(GO) test -run '^$$' -bench 'Insert100k|List|Operations|Explain' -benchtime=1x -timeout 90m -v ./store/...
	$(WITH_SERVICES) $(GO) test -run '^$$' -bench '^BenchmarkSearch(Lag|Indexer)?$$' -benchtime=1x -timeout 60m -v ./store/postgres/ ./store/sqlite/
	$(WITH_SERVICES) $(GO) test -run '^$$' -bench 'BinaryVsBareDrain|CollectorVsBareDrain|PeakRSS' -benchtime=1x -timeout 60m ./broker/rabbitmq/
	$(WITH_SERVICES) $(GO) test -run '^$$' -bench 'DecodeEnvelope' -benchmem ./collect/
	$(WITH_SERVICES) $(GO) test -run '^$$' -bench 'Drain' -benchtime=1x -timeout 90m ./broker/nats/ ./broker/sqs/
	$(WITH_SERVICES) $(GO) test -run '^$$' -bench 'ReplayRate' -benchtime=1x -timeout 30m ./replay/
	$(WITH_SERVICES) $(GO) test -run '^$$' -bench 'ReplayPublishVsBare|ReplayBinaryVsBare' -benchtime=1x -timeout 30m ./broker/rabbitmq/
	$(WITH_SERVICES) $(GO) test -run '^$$' -bench '^BenchmarkPages$$' -benchtime=1x -timeout 60m -v ./web/

clean: ## remove build outputs and the embedded default database
	rm -rf bin quarantine-data
