// Package gomem sets the Go runtime's memory settings that the operator left
// unset: a soft memory limit from the container's (or else the machine's)
// memory, and the collector's pace by what the process runs
// (docs/operations/operations.md, Memory).
package gomem

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// Role is what a process runs, as far as its memory is concerned.
type Role int

const (
	// Projectors: the process runs the projectors (alone or with the rest).
	Projectors Role = iota
	// API: the process serves the API and runs no projector.
	API
	// Other: anything else (the exporter).
	Other
)

// ProjectorGCPercent is the GOGC a process that runs the projectors runs
// with unless GOGC is set. A projector's live heap is small beside what a
// batch allocates (decoded events, the inserts' columns), so at Go's default
// of 100 it collects many times a second; at 400 it collects a quarter as
// often, with the heap at about five times the live data, and the memory
// limit below keeps that within the container.
const ProjectorGCPercent = 400

// LimitRatio is the share of the container's (or the machine's) memory the
// soft limit is set to (unless GOMEMLIMIT is set, or AUTOMEMLIMIT gives
// another ratio or "off").
const LimitRatio = 0.9

// Settings are what Tune left the runtime with, and where each came from.
type Settings struct {
	GCPercent     int    // -1: off
	GCPercentFrom string // "GOGC" (the environment), "projector", "api" or "default"
	MemoryLimit   int64  // bytes; math.MaxInt64: none
	LimitFrom     string // "GOMEMLIMIT", "cgroup", "system", "AUTOMEMLIMIT=off" or "none"
}

// gcPercent decides the collector's setting: GOGC when it is set (the
// runtime has applied it already); ProjectorGCPercent in a process that runs
// the projectors; off in an API process whose memory limit is its own (its
// container's, or GOMEMLIMIT), so that it collects only near that limit and
// not every two minutes, as Go's default does, each collection slowing the
// auctions of its seconds; else Go's default. set says whether Tune must
// apply it.
func gcPercent(lookup func(string) (string, bool), role Role, limitFrom string, limit int64) (pct int, from string, set bool) {
	if v, ok := lookup("GOGC"); ok {
		return parseGOGC(v), "GOGC", false
	}
	switch {
	case role == Projectors:
		return ProjectorGCPercent, "projector", true
	case role == API && (limitFrom == "cgroup" || limitFrom == "GOMEMLIMIT") && limit != math.MaxInt64:
		return -1, "api", true
	}
	return 100, "default", false
}

// parseGOGC reads GOGC as the runtime does: "off" is -1, a number is
// itself, anything else leaves the default.
func parseGOGC(v string) int {
	if v == "off" {
		return -1
	}
	if n, err := strconv.Atoi(v); err == nil {
		return n
	}
	return 100
}

// Tune applies the settings (once, at start, before the process allocates
// much) and logs them. A failure to read the limit is logged and leaves the
// runtime without one, as Go starts.
func Tune(role Role, log *slog.Logger) Settings {
	return tune(os.LookupEnv, role, memlimit.FromCgroup, memlimit.FromSystem, log)
}

func tune(lookup func(string) (string, bool), role Role, cgroup, system memlimit.Provider, log *slog.Logger) Settings {
	var st Settings
	used := "none"
	_, envLimit := lookup("GOMEMLIMIT")
	ratio, _ := lookup("AUTOMEMLIMIT")
	switch {
	case envLimit:
		used = "GOMEMLIMIT"
	case ratio == "off":
		used = "AUTOMEMLIMIT=off"
	default:
		provider := func() (uint64, error) { // the cgroup's, else the machine's; records which
			if n, err := cgroup(); err == nil {
				used = "cgroup"
				return n, nil
			}
			n, err := system()
			if err == nil {
				used = "system"
			}
			return n, err
		}
		if _, err := memlimit.Set(memlimit.WithRatio(LimitRatio), memlimit.WithProvider(provider)); err != nil {
			log.Warn("go runtime: could not read the memory limit; running without one", "err", err)
			used = "none"
		}
	}
	st.LimitFrom = used
	st.MemoryLimit = debug.SetMemoryLimit(-1)

	pct, from, set := gcPercent(lookup, role, st.LimitFrom, st.MemoryLimit)
	st.GCPercent, st.GCPercentFrom = pct, from
	if set {
		debug.SetGCPercent(pct)
	}

	limit := any("none")
	if st.MemoryLimit != math.MaxInt64 {
		limit = st.MemoryLimit
	}
	log.Info("go runtime memory settings", "gc_percent", st.GCPercent, "gc_percent_from", st.GCPercentFrom,
		"memory_limit_bytes", limit, "memory_limit_from", st.LimitFrom)
	return st
}
