# Endcap — the two commands a new user needs are `make run` and `make test`.
GO      ?= go
BIN     := bin/endcap
GOFLAGS ?=
export PATH := /usr/local/go/bin:$(PATH)

.PHONY: run test build deps test-deps unit lint bench-events bench-auctions clean-dev

## build: the development binary into bin/endcap (with dev, kafka and loadgen: -tags dev); the
## production binary is a plain `go build ./cmd/endcap`
build:
	$(GO) build -tags dev -o $(BIN) ./cmd/endcap

## deps: install what the local stack needs (ClickHouse, Redis, versitygw); idempotent
deps:
	./deploy/local/install.sh

## test-deps: deps, and what only the tests need (ZooKeeper, Node.js for the SDK test, chDB); idempotent
test-deps:
	./deploy/local/install.sh --test

## run: the whole system on the local stack with a demo marketplace (Ctrl-C stops it)
run: deps build
	./$(BIN) dev

# The packages whose integration tests run a second time on a Redis Cluster (make test).
REDIS_CLUSTER_PKGS := ./storage/redisstore ./storage/statelog ./auction/budget ./management/segments ./reporting/exports ./api ./projections

## test: unit and integration tests against real ClickHouse, Redis, S3 and kfake; every statement of the
## integration tests also replayed on ClickHouse 26 (chDB, docs/clickhouse.md); then the packages that use
## Redis again on a local Redis Cluster of three masters and three replicas
test: test-deps
	$(GO) vet ./...
	$(GO) vet -tags dev ./cmd/endcap
	ENDCAP_TEST_REQUIRE_STACK=1 ENDCAP_TEST_CHDB=1 $(GO) test -count=1 -timeout 40m ./...
	ENDCAP_TEST_REQUIRE_STACK=1 ENDCAP_TEST_REDIS_CLUSTER=1 $(GO) test -count=1 -timeout 20m $(REDIS_CLUSTER_PKGS)

## lint: golangci-lint with .golangci.yml (vet, staticcheck, errcheck, depguard's import rules, …)
lint:
	./deploy/local/lint.sh

## unit: the tests that need no server
unit:
	$(GO) test -count=1 -short ./...

## bench-events: load-generate /v2/events against the running stack and the bare Gin baseline, side by side
bench-events: build
	./deploy/local/bench-events.sh

## bench-auctions: seed a 1M-product marketplace (once) and load-generate /v2/auctions against it and the bare baseline
bench-auctions: build
	./deploy/local/bench-auctions.sh

## clean-dev: delete the local stack's data (.endcap) — the demo marketplace and its keys are recreated
clean-dev:
	rm -rf .endcap/clickhouse .endcap/redis .endcap/redis-cluster .endcap/s3 .endcap/kafka .endcap/mail .endcap/dev .endcap/run .endcap/logs
