package perfbudget

//go:noescape
func clientRequest(args *[6]uintptr) uintptr

const callgrindSupported = true
