# Endcap — the two commands a new user needs are `make run` and `make test`.
GO      ?= go
BIN     := bin/endcap
GOFLAGS ?=
export PATH := /usr/local/go/bin:$(PATH)

.PHONY: run test build image chart deps test-deps unit lint bench-events bench-auctions bench-overload clean-dev

## build: the development binary into bin/endcap (with dev, kafka and loadgen: -tags dev); the
## production binary is a plain `go build ./cmd/endcap`
build:
	$(GO) build -tags dev -o $(BIN) ./cmd/endcap

## image: the OCI image dist/endcap-oci.tar of the production binary, without a container engine
## (tools/image; docker load, podman load, crane push; docs/operations/deploy.md)
image:
	cd tools/image && SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) $(GO) run . -src ../.. -out ../../dist/endcap-oci.tar

## chart: put deploy/monitoring's rule files in the Helm chart (files/rules/) before it is packaged
chart:
	rm -f deploy/helm/endcap/files/rules/*.rules.yml
	if ls deploy/monitoring/*.rules.yml >/dev/null 2>&1; then cp deploy/monitoring/*.rules.yml deploy/helm/endcap/files/rules/; fi

## deps: install what the local stack needs (ClickHouse, Redis, versitygw); idempotent
deps:
	./deploy/local/install.sh

## test-deps: deps, and what only the tests need (ZooKeeper, Node.js for the SDK test, chDB); idempotent
test-deps:
	./deploy/local/install.sh --test

## run: the whole system on the local stack with a demo marketplace (Ctrl-C stops it)
run: deps build
	./$(BIN) dev

# The modules of their own that make test runs too (go test ./... does not enter them): the image
# builder, and the Helm chart's render tests (Helm and k8s.io/* stay out of the production module).
TEST_MODULES := tools/image deploy/helm

# The packages whose integration tests run a second time on a Redis Cluster (make test).
REDIS_CLUSTER_PKGS := ./storage/redisstore ./storage/statelog ./spend ./management/segments ./management/campaigns/freqcap ./reporting/exports ./api ./projections

## test: unit and integration tests against real ClickHouse, Redis, S3 and kfake; every statement of the
## integration tests also replayed on ClickHouse 26 (chDB, docs/design/clickhouse.md); then the packages that use
## Redis again on a local Redis Cluster of three masters and three replicas
test: test-deps
	$(GO) vet ./...
	$(GO) vet -tags dev ./cmd/endcap
	ENDCAP_TEST_REQUIRE_STACK=1 ENDCAP_TEST_CHDB=1 $(GO) test -count=1 -timeout 40m ./...
	ENDCAP_TEST_REQUIRE_STACK=1 ENDCAP_TEST_REDIS_CLUSTER=1 $(GO) test -count=1 -timeout 20m $(REDIS_CLUSTER_PKGS)
	$(foreach m,$(TEST_MODULES),$(GO) -C $(m) vet ./... && $(GO) -C $(m) test -count=1 -timeout 10m ./... &&) true

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

## bench-overload: /v2/events at 5x its sustainable rate on a stack of its own: what is shed, the accepted requests' p99, RSS
bench-overload: build
	./deploy/local/bench-overload.sh

## clean-dev: delete the local stack's data (.endcap) — the demo marketplace and its keys are recreated
clean-dev:
	rm -rf .endcap/clickhouse .endcap/redis .endcap/redis-cluster .endcap/s3 .endcap/kafka .endcap/mail .endcap/dev .endcap/run .endcap/logs
