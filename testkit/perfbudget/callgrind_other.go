//go:build !amd64

package perfbudget

func clientRequest(*[6]uintptr) uintptr { return 0 }

const callgrindSupported = false
