//go:build cgo && linux

package claimstore

/*
#include <malloc.h>
*/
import "C"

// canTrim: the C allocator's free memory can be handed back (glibc).
const canTrim = true

// trimC hands the free pages of every malloc arena back to the OS
// (malloc_trim(0): since glibc 2.8 also those inside an arena, not only at
// its top). Pebble allocates its block cache and memtables with malloc in
// a cgo build; the blocks the cache frees stay in the arenas otherwise,
// and the process's resident memory grows with the store.
func trimC() { C.malloc_trim(0) }
