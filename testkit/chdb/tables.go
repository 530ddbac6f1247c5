package chdb

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/clickhouse/chrecord"
)

// CompareTables compares the content of every table of database on the
// recorded server (conn) with the same table on e after a replay: the
// batch inserts replayed must have loaded the same rows, and what the
// replayed statements derived from them (INSERT … SELECT, materialized
// views, partitions swapped) must be the same. Engines that fold rows
// (Replacing-, Summing-, AggregatingMergeTree…) are read with FINAL, so
// that when each engine happened to merge its parts does not matter;
// AggregateFunction columns (states, whose bytes are the engine's own) are
// left out. It returns the differences, and the number of tables and of
// rows compared.
func CompareTables(ctx context.Context, e *Engine, conn clickhouse.Conn, database string) (diffs []string, tables, rows int, err error) {
	list, err := conn.Query(ctx, `SELECT name, engine FROM system.tables
		WHERE database = ? AND engine LIKE '%MergeTree' AND NOT startsWith(name, '.inner') ORDER BY name`, database)
	if err != nil {
		return nil, 0, 0, err
	}
	type table struct{ name, engine string }
	var all []table
	for list.Next() {
		var t table
		if err := list.Scan(&t.name, &t.engine); err != nil {
			list.Close()
			return nil, 0, 0, err
		}
		all = append(all, t)
	}
	list.Close()
	if err := list.Err(); err != nil {
		return nil, 0, 0, err
	}
	for _, t := range all {
		cols, err := columnsOf(ctx, conn, database, t.name)
		if err != nil {
			return nil, 0, 0, err
		}
		final := ""
		if t.engine != "MergeTree" {
			final = " FINAL"
		}
		q := "SELECT " + strings.Join(cols, ", ") + " FROM " + database + "." + t.name + final
		want, err := readCanon(ctx, conn, q)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("%s: %w", q, err)
		}
		rows += len(want.rows)
		out, err := e.Query(ctx, q, "JSONCompactEachRowWithNamesAndTypes")
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("%s: refused by %s: %v", t.name, e.Version(), err))
			continue
		}
		s := chrecord.Statement{Kind: chrecord.Query, SQL: q, Captured: true, Complete: true, Result: want.rows, Names: want.names, Types: want.types}
		if what, _ := Compare(s, out); what != "" {
			diffs = append(diffs, fmt.Sprintf("table %s (%d rows on the recorded server): %s", t.name, len(want.rows), what))
		}
	}
	return diffs, len(all), rows, nil
}

func columnsOf(ctx context.Context, conn clickhouse.Conn, database, table string) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT name, type FROM system.columns
		WHERE database = ? AND table = ? AND default_kind NOT IN ('MATERIALIZED', 'ALIAS')`, database, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(typ, "AggregateFunction(") {
			cols = append(cols, "`"+name+"`")
		}
	}
	return cols, rows.Err()
}

type canonResult struct {
	names, types []string
	rows         [][]string
}

// readCanon reads a query's rows on the recorded server as chrecord.Canon
// strings, scanning each column into the type the driver offers for it.
func readCanon(ctx context.Context, conn clickhouse.Conn, q string) (canonResult, error) {
	var r canonResult
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return r, err
	}
	defer rows.Close()
	cts := rows.ColumnTypes()
	for _, ct := range cts {
		r.names = append(r.names, ct.Name())
		r.types = append(r.types, ct.DatabaseTypeName())
	}
	for rows.Next() {
		dest := make([]any, len(cts))
		for i, ct := range cts {
			dest[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(dest...); err != nil {
			return r, err
		}
		row := make([]string, len(dest))
		for i, d := range dest {
			row[i] = chrecord.Canon(r.types[i], d)
		}
		r.rows = append(r.rows, row)
	}
	slices.SortFunc(r.rows, func(a, b []string) int { return slices.Compare(a, b) })
	return r, rows.Err()
}
