//go:build dev

package main

// The development build's commands: `go build -tags dev ./cmd/endcap` (make
// build, make run). The production build (no tag) links neither the local
// stack (deploy/localstack, kfake) nor the load generator.
func init() {
	devCommands["dev"] = cmdDev
	devCommands["kafka"] = cmdKafka
	devCommands["loadgen"] = cmdLoadgen
	devUsage = `
Development build:
  endcap dev [--dir .endcap] [--target all|api] [flags]         run the whole local stack with a demo marketplace
  endcap kafka [--dir .endcap] [flags]                          the local stack's Kafka (kfake) alone, for 'endcap dev --kfake=false'
  endcap kafka [--sasl-user U:P] [--tls-cert F --tls-key F]     the same broker with SASL (PLAIN, SCRAM) and TLS
  endcap loadgen events [--url URL] [--key KEY] [--duration 30s] [--concurrency 32] [--rate 0]
  endcap loadgen seed [--products 1000000] [--campaigns 100000]  seed a marketplace for auction benchmarks (public API)
  endcap loadgen auctions [--rate 1000] [--ids 500] [--duration 30s]  load-generate /v2/auctions
  endcap loadgen bare [--addr 127.0.0.1:18099]                  the bare Gin baseline server
`
}
