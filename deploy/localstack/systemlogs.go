package localstack

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// DefaultSystemLogDays is how many days of ClickHouse's system logs the stack keeps
// (Options.ClickHouseSystemLogDays).
const DefaultSystemLogDays = 3

// systemLogs are the system logs the stack configures (templates/config.xml.tmpl), partitioned by day.
var systemLogs = []string{"query_log", "part_log"}

// startPruning drops the days of the system logs older than keep days now and every hour, on every
// server, until Stop.
func (s *Stack) startPruning(keep int) {
	if keep <= 0 {
		keep = DefaultSystemLogDays
	}
	s.pruneEnd = make(chan struct{})
	s.pruned.Add(1)
	go func() {
		defer s.pruned.Done()
		t := time.NewTicker(time.Hour)
		defer t.Stop()
		for {
			for _, addr := range s.ClickHouseHTTPAddrs {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if dropped, err := pruneSystemLogs(ctx, addr, time.Now(), keep); err != nil {
					s.log.Warn("localstack: pruning ClickHouse's system logs failed; tried again in an hour", "addr", addr, "err", err)
				} else if len(dropped) > 0 {
					s.log.Info("localstack: dropped old days of ClickHouse's system logs", "addr", addr, "partitions", dropped)
				}
				cancel()
			}
			select {
			case <-s.pruneEnd:
				return
			case <-t.C:
			}
		}
	}()
}

// pruneSystemLogs drops, from the system logs of the server at httpAddr, the partitions of days (YYYYMMDD)
// before now less keep days, and of months (YYYYMM: partitioned as 18.16 does by default) that ended
// before it. It returns the table.partition it dropped.
func pruneSystemLogs(ctx context.Context, httpAddr string, now time.Time, keep int) ([]string, error) {
	cutoff := now.UTC().AddDate(0, 0, -keep).Format("20060102")
	out, err := clickHouseHTTPQuery(ctx, httpAddr, "SELECT DISTINCT table, partition_id FROM system.parts WHERE database = 'system' AND table IN ('"+
		strings.Join(systemLogs, "', '")+"') AND active ORDER BY table, partition_id")
	if err != nil {
		return nil, fmt.Errorf("system logs' partitions: %w", err)
	}
	var dropped []string
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		table, id, ok := strings.Cut(line, "\t")
		if !ok {
			continue
		}
		old := false
		switch len(id) {
		case 8:
			old = id < cutoff
		case 6:
			old = id+"99" < cutoff[:6]+"00" // the whole month is before the cut-off's month
		}
		if !old || strings.Trim(id, "0123456789") != "" {
			continue
		}
		if _, err := clickHouseHTTPQuery(ctx, httpAddr, "ALTER TABLE system."+table+" DROP PARTITION ID '"+id+"'"); err != nil {
			return dropped, fmt.Errorf("drop partition %s of system.%s: %w", id, table, err)
		}
		dropped = append(dropped, table+"."+id)
	}
	return dropped, nil
}
