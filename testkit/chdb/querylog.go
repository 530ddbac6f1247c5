package chdb

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// LoggedStatement is one statement of a server's system.query_log.
type LoggedStatement struct {
	At    time.Time
	Query string
	Err   string // the exception the logged server answered
}

// Refusal is a logged statement the engine refused.
type Refusal struct {
	Stmt LoggedStatement
	Err  string
}

// QueryLogReport is what ReplayQueryLog found.
type QueryLogReport struct {
	Statements int // replayed
	Loaded     map[string]int
	Refused    []Refusal // refused by the engine
	LoggedErrs []LoggedStatement
}

// nativeInsert is a batch insert as the query log shows it (its rows are not
// in the log).
var nativeInsert = regexp.MustCompile(`(?is)^\s*INSERT\s+INTO\s+([\w.]+)\s*(\([^)]*\))?\s*(FORMAT\s+Native|VALUES)\s*$`)

// ReplayQueryLog replays on e, in order, every statement that clients of
// the native protocol ran on the server whose HTTP interface is at
// httpURL, as its system.query_log holds them (the local stack keeps one
// with `endcap dev --clickhouse-system-logs`), in database (created on e
// and made current). The log has no rows of batch inserts: the first time
// the log inserts into a table, the table's whole content is copied from the
// server instead (as JSONEachRow), so that the reads and the INSERT …
// SELECTs that follow meet data. Statements are checked for acceptance only:
// the copied data is the server's last state, not the state at each
// statement. The log must start before the first migration (a fresh data
// directory).
//
// Order: 18.16 logs times to the second only. The log is read by one
// thread without ORDER BY: in its sort order (event_date, event_time), and
// within a second in the order the statements finished (a part keeps the
// order of insertion among equal keys, and merges keep the order of their
// parts), which is the code's order for statements it runs one after the
// other.
func ReplayQueryLog(ctx context.Context, e *Engine, httpURL, database string) (QueryLogReport, error) {
	rep := QueryLogReport{Loaded: map[string]int{}}
	if _, err := httpQuery(ctx, httpURL, "", "SYSTEM FLUSH LOGS"); err != nil {
		return rep, err
	}
	out, err := httpQuery(ctx, httpURL, "", `SELECT toUnixTimestamp(event_time) AS t, query, exception
		FROM system.query_log WHERE type != 1 AND is_initial_query AND interface = 1
		SETTINGS max_threads = 1 FORMAT JSONEachRow`)
	if err != nil {
		return rep, err
	}
	var stmts []LoggedStatement
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var r struct {
			T         json.Number `json:"t"`
			Query     string      `json:"query"`
			Exception string      `json:"exception"`
		}
		if err := dec.Decode(&r); err != nil {
			return rep, fmt.Errorf("chdb: query log: %w", err)
		}
		sec, _ := r.T.Int64()
		stmts = append(stmts, LoggedStatement{At: time.Unix(sec, 0).UTC(), Query: r.Query, Err: r.Exception})
	}
	for _, q := range append([]string{"CREATE DATABASE IF NOT EXISTS " + database, "USE " + database}, sessionSettings...) {
		if err := e.Exec(ctx, q); err != nil {
			return rep, err
		}
	}
	for _, s := range stmts {
		if s.Err != "" {
			rep.LoggedErrs = append(rep.LoggedErrs, s)
			continue
		}
		rep.Statements++
		q := s.Query
		if m := nativeInsert.FindStringSubmatch(q); m != nil {
			table := m[1]
			if _, done := rep.Loaded[table]; done {
				continue
			}
			rows, err := httpQuery(ctx, httpURL, database, "SELECT * FROM "+table+" FORMAT JSONEachRow")
			if err != nil {
				return rep, err
			}
			rep.Loaded[table] = strings.Count(rows, "\n")
			q = "INSERT INTO " + table + " FORMAT JSONEachRow\n" + rows
		}
		if err := e.Exec(ctx, q); err != nil {
			rep.Refused = append(rep.Refused, Refusal{s, err.Error()})
		}
	}
	return rep, nil
}

// httpQuery runs a query on a server's HTTP interface.
func httpQuery(ctx context.Context, base, database, q string) (string, error) {
	u := base + "/"
	if database != "" {
		u += "?database=" + url.QueryEscape(database)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", u, strings.NewReader(q))
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("chdb: %s: %w", base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("chdb: %s: %s: %.500s", base, resp.Status, b)
	}
	return string(b), nil
}
