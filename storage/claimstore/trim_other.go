//go:build !(cgo && linux)

package claimstore

// canTrim: without cgo Pebble allocates in Go memory, which the Go
// runtime hands back by itself.
const canTrim = false

func trimC() {}
