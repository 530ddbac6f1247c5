// Package clickhouse is the adapter to ClickHouse: connection, versioned
// migrations and batch inserts. One code path serves Debian's 18.16 (local
// stack and tests) and a current ClickHouse (production); see
// docs/clickhouse.md for the rules it follows.
package clickhouse

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Conn is a native-protocol connection pool.
type Conn = driver.Conn

// Options say where ClickHouse is.
type Options struct {
	Addr     string
	Database string
	User     string
	Password string
}

// Open returns a native-protocol pool for o.Database. It makes no network
// call: a server that is down makes later calls fail, not Open.
func Open(o Options) (Conn, error) {
	if !identRe.MatchString(o.Database) {
		return nil, fmt.Errorf("clickhouse: database name %q is not a plain identifier", o.Database)
	}
	c, err := open(o, o.Database)
	if err == nil {
		if h := openHook.Load(); h != nil {
			c = (*h)(o, c)
		}
	}
	return c, err
}

var openHook atomic.Pointer[func(Options, Conn) Conn]

// SetOpenHook makes Open pass every connection it returns through wrap (nil:
// none). For tests: storage/clickhouse/chrecord records the statements the
// code sends this way.
func SetOpenHook(wrap func(Options, Conn) Conn) {
	if wrap == nil {
		openHook.Store(nil)
		return
	}
	openHook.Store(&wrap)
}

func open(o Options, db string) (Conn, error) {
	return ch.Open(&ch.Options{
		Protocol:         ch.Native,
		Addr:             []string{o.Addr},
		Auth:             ch.Auth{Database: db, Username: o.User, Password: o.Password},
		DialTimeout:      2 * time.Second,
		ReadTimeout:      60 * time.Second,
		MaxOpenConns:     8,
		MaxIdleConns:     4,
		ConnMaxLifetime:  time.Hour,
		ConnOpenStrategy: ch.ConnOpenInOrder,
	})
}

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// EnsureDatabase creates o.Database when it does not exist.
func EnsureDatabase(ctx context.Context, o Options) error {
	if !identRe.MatchString(o.Database) {
		return fmt.Errorf("clickhouse: database name %q is not a plain identifier", o.Database)
	}
	c, err := open(o, "default")
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+o.Database); err != nil {
		return fmt.Errorf("clickhouse: create database %s: %w", o.Database, err)
	}
	return nil
}

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration is one numbered schema step: statements separated by ';' lines.
type Migration struct {
	Version    int
	Name       string
	Statements []string
}

// Migrations returns the embedded migrations in version order.
func Migrations() ([]Migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "migrations/"), ".sql")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration file %s: name must be NNNN_name.sql", n)
		}
		body, err := migrationFiles.ReadFile(n)
		if err != nil {
			return nil, err
		}
		m := Migration{Version: v, Name: base}
		for _, st := range strings.Split(string(body), ";\n") {
			if st = strings.TrimSpace(stripComments(st)); st != "" {
				if err := CheckStatement(st); err != nil {
					return nil, fmt.Errorf("migration file %s: %w", n, err)
				}
				m.Statements = append(m.Statements, st)
			}
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("two migrations numbered %d", out[i].Version)
		}
	}
	return out, nil
}

func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// Migrate applies every migration newer than the schema's version. Each
// statement is idempotent (IF NOT EXISTS, or an ADD COLUMN skipped when the
// column exists), so two processes migrating at the same time, or one
// re-running a migration that failed half-way, converge on the same schema.
func Migrate(ctx context.Context, c Conn, log *slog.Logger) (applied int, err error) {
	ms, err := Migrations()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := c.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version UInt32, name String, applied_at DateTime
	) ENGINE = MergeTree() ORDER BY version`); err != nil {
		return 0, fmt.Errorf("clickhouse: schema_migrations: %w", err)
	}
	current, err := SchemaVersion(ctx, c)
	if err != nil {
		return 0, err
	}
	for _, m := range ms {
		if m.Version <= current {
			continue
		}
		for i, st := range m.Statements {
			if err := execStatement(ctx, c, st); err != nil {
				return applied, fmt.Errorf("clickhouse: migration %s statement %d: %w", m.Name, i+1, err)
			}
		}
		b, err := c.PrepareBatch(ctx, "INSERT INTO schema_migrations (version, name, applied_at)")
		if err != nil {
			return applied, err
		}
		if err := b.Append(uint32(m.Version), m.Name, time.Now().UTC()); err != nil {
			return applied, err
		}
		if err := b.Send(); err != nil {
			return applied, fmt.Errorf("clickhouse: record migration %s: %w", m.Name, err)
		}
		applied++
		if log != nil {
			log.Info("clickhouse migration applied", "version", m.Version, "name", m.Name)
		}
	}
	return applied, nil
}

// addColumn matches a migration statement that adds one column:
// ALTER TABLE <table> ADD COLUMN <name> ...
var addColumn = regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+(\w+)\s`)

// addColumns finds every ADD COLUMN of a statement.
var addColumns = regexp.MustCompile(`(?i)\bADD\s+COLUMN\b`)

// CheckStatement refuses a migration statement the migrator could not run
// idempotently: an ADD COLUMN other than ALTER TABLE <table> ADD COLUMN
// <name> ..., one column a statement.
func CheckStatement(st string) error {
	if k := len(addColumns.FindAllStringIndex(st, -1)); k > 1 || k == 1 && !addColumn.MatchString(st) {
		return fmt.Errorf("ADD COLUMN only as ALTER TABLE <table> ADD COLUMN <name> ..., one column a statement: %.60q", st)
	}
	return nil
}

// execStatement runs one migration statement. An ALTER TABLE ... ADD COLUMN
// of a column that exists is skipped (18.16 has no ADD COLUMN IF NOT
// EXISTS), and one that fails because another process added the column at
// the same time succeeds: like every other statement, it is idempotent.
func execStatement(ctx context.Context, c Conn, st string) error {
	m := addColumn.FindStringSubmatch(st)
	if m == nil {
		return c.Exec(ctx, st)
	}
	has := func() (bool, error) {
		var n uint64
		err := c.QueryRow(ctx, `SELECT count() FROM system.columns
			WHERE database = currentDatabase() AND table = ? AND name = ?`, m[1], m[2]).Scan(&n)
		return n > 0, err
	}
	if ok, err := has(); err != nil || ok {
		return err
	}
	err := c.Exec(ctx, st)
	if err != nil {
		if ok, _ := has(); ok {
			return nil
		}
	}
	return err
}

// SchemaVersion is the highest applied migration (0 for none).
func SchemaVersion(ctx context.Context, c Conn) (int, error) {
	var v uint32
	if err := c.QueryRow(ctx, "SELECT max(version) FROM schema_migrations").Scan(&v); err != nil {
		return 0, fmt.Errorf("clickhouse: read schema version: %w", err)
	}
	return int(v), nil
}

// LatestVersion is the version of the newest embedded migration.
func LatestVersion() int {
	ms, err := Migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}

// LongQuery returns ctx for a query whose text (bound arrays included, as
// the driver binds them into it) may be up to n bytes long: ClickHouse
// refuses a longer text than its max_query_size, 256 KiB by default.
func LongQuery(ctx context.Context, n int) context.Context {
	return ch.Context(ctx, ch.WithSettings(ch.Settings{"max_query_size": max(n, 256<<10)}))
}

// Insert returns ctx for an INSERT whose rows the client sends as one block
// (clickhouse-go sends a batch as one): the server writes that block as a
// part as it comes. By default it would first copy every block into a block
// of its own until min_insert_block_size_rows (about a million rows) or
// min_insert_block_size_bytes (256 MiB) is reached, to squash the many small
// blocks of a streamed insert into one part; for a batch that is already
// one block that copy is pure cost: a copy of every inserted byte into
// fresh memory (docs/clickhouse.md). Both settings exist on 18.16 and on
// current servers, where 0 is documented as "squashing disabled". It
// replaces any query settings ctx already carries.
func Insert(ctx context.Context) context.Context {
	return ch.Context(ctx, ch.WithSettings(ch.Settings{
		"min_insert_block_size_rows":  0,
		"min_insert_block_size_bytes": 0,
	}))
}

// Streaming returns ctx for a query whose result is read row by row in
// bounded memory: the server sends blocks of at most blockRows rows and the
// driver decodes one block ahead of the reader. settings go with the query
// (for example max_bytes_before_external_group_by, so that a large GROUP BY
// spills to disk on the server instead of failing).
func Streaming(ctx context.Context, blockRows int, settings map[string]any) context.Context {
	s := ch.Settings{"max_block_size": blockRows}
	for k, v := range settings {
		s[k] = v
	}
	return ch.Context(ctx, ch.WithSettings(s), ch.WithBlockBufferSize(1))
}
