package scoredfiles

import (
	"context"
	"errors"
	"time"

	"github.com/endcap/endcap/reporting/attribution"
)

// Schedule says when days are produced (docs/reference/scored-attribution.md).
type Schedule struct {
	// Grace is how long after a local day ends its file is first produced:
	// time for late events to arrive and for the projectors to fold them.
	Grace time.Duration
	// CatchUp is how many closed days back a missing file is still produced
	// (after an exporter outage). Older days are produced when they become
	// final, or by hand.
	CatchUp int
	// Tick is how often the marketplaces are checked.
	Tick time.Duration
	// Marketplaces lists the marketplaces to produce (called every tick).
	Marketplaces func() []Marketplace
	// Notify, when set, is told of each day's file in the stage it must be
	// in (produced now, or found produced by a process that may have died
	// before telling): once per process run and stage of a day, again on
	// the next tick when it fails. It must be idempotent.
	Notify func(ctx context.Context, mp Marketplace, day time.Time, final bool) error
}

// Run produces, for every marketplace, each local day once it has closed
// plus Grace (a first, provisional file), and again once its attribution is
// final (attribution.FinalAfter of the day's end, plus Grace): the final
// file replaces the provisional one. Days already done are remembered in
// memory and otherwise recognised by their object's metadata, so several
// exporters and restarts produce each file once per stage; a Redis lock
// per day keeps two exporters from running the same day at once. Run
// returns when ctx ends.
func (s *Service) Run(ctx context.Context, sch Schedule) error {
	if sch.Tick <= 0 {
		sch.Tick = time.Minute
	}
	if sch.CatchUp <= 0 {
		sch.CatchUp = 3
	}
	done := map[string]bool{} // key → final already stored (true) or provisional (false)
	t := time.NewTicker(sch.Tick)
	defer t.Stop()
	for {
		seen := map[string]bool{} // only the days still due are remembered
		for _, mp := range sch.Marketplaces() {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			for _, d := range dueDays(s.now(), mp.Location, sch.Grace, sch.CatchUp) {
				s.ensure(ctx, mp, d.day, d.final, done, sch.Notify)
				if f, ok := done[Key(mp.ID, d.day)]; ok {
					seen[Key(mp.ID, d.day)] = f
				}
			}
		}
		done = seen
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

type dueDay struct {
	day   time.Time // local date as UTC midnight
	final bool      // the day's attribution is final: the file must be too
}

// dueDays are the local days to check at now: the last catchUp days closed
// for at least grace (provisional at least), and the 2 latest days final
// for at least grace (they must be final).
func dueDays(now time.Time, loc *time.Location, grace time.Duration, catchUp int) []dueDay {
	if loc == nil {
		loc = time.UTC
	}
	latestClosed := lastDayEndedBy(now.Add(-grace), loc)
	var out []dueDay
	for i := range catchUp {
		out = append(out, dueDay{day: latestClosed.AddDate(0, 0, -i)})
	}
	horizon := attribution.FinalAfter(now).Sub(now)
	latestFinal := lastDayEndedBy(now.Add(-grace-horizon), loc)
	for i := range 2 {
		out = append(out, dueDay{day: latestFinal.AddDate(0, 0, -i), final: true})
	}
	return out
}

// lastDayEndedBy is the latest local date (as a UTC midnight) whose end in
// loc is at or before t.
func lastDayEndedBy(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc) // yesterday, local, ended at today's local midnight
	return time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, -1)
}

// ensure produces day when its file is missing, or provisional while it
// must be final. Failures are logged; the next tick tries again.
func (s *Service) ensure(ctx context.Context, mp Marketplace, day time.Time, mustBeFinal bool, done map[string]bool,
	notify func(ctx context.Context, mp Marketplace, day time.Time, final bool) error) {
	told := func(final bool) bool {
		if notify == nil {
			return true
		}
		if err := notify(ctx, mp, day, final); err != nil {
			s.log.Warn("scored attribution: file not announced; retrying next tick", "marketplace", mp.ID, "day", day.Format(time.DateOnly), "err", err)
			return false
		}
		return true
	}
	key := Key(mp.ID, day)
	if final, ok := done[key]; ok && (final || !mustBeFinal) {
		return
	}
	hctx, cancel := context.WithTimeout(ctx, headTimeout)
	exists, final, err := s.produced(hctx, mp.ID, day)
	cancel()
	if err != nil {
		s.log.Warn("scored attribution: cannot check a day", "marketplace", mp.ID, "day", day.Format(time.DateOnly), "err", err)
		return
	}
	if exists && (final || !mustBeFinal) {
		if told(final) {
			done[key] = final
		}
		return
	}
	res, err := s.Produce(ctx, mp, day)
	switch {
	case err == nil:
		if told(res.Final) {
			done[key] = res.Final
		}
	case errors.Is(err, ErrBusy), ctx.Err() != nil:
	default:
		s.log.Error("scored attribution: day not produced; retrying next tick", "marketplace", mp.ID, "day", day.Format(time.DateOnly), "err", err)
	}
}
