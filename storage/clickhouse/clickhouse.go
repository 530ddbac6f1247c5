// Package clickhouse is the adapter to ClickHouse: connection, versioned
// migrations and batch inserts. One code path serves Debian's 18.16 (local
// stack and tests) and a current ClickHouse (production); see
// docs/design/clickhouse.md for the rules it follows.
package clickhouse

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/endcap/endcap/internal/retry"
)

// Conn is a native-protocol connection pool.
type Conn = driver.Conn

// Batch is a prepared insert (Conn.PrepareBatch).
type Batch = driver.Batch

// Options say where ClickHouse is.
type Options struct {
	// Addr is a native-protocol address, or several separated by commas
	// (the replicas of a cluster): connections go to the first that
	// answers, in order, so that every process reads and writes the same
	// replica while it is up, and fail over to the next one when it is not.
	Addr     string
	Database string
	User     string
	Password string
	// TLS: the native protocol over TLS, the server's certificate verified
	// against the authorities of the PEM file TLSCA (empty: the system's).
	TLS   bool
	TLSCA string
	// Cluster, when set, is the cluster (in the servers' <remote_servers>)
	// on whose every replica the database and the schema are created, with
	// replicated tables (Schema, docs/design/clickhouse.md). Empty: one server.
	Cluster string
}

// Addrs are the addresses of o.Addr.
func (o Options) Addrs() []string {
	var out []string
	for _, a := range strings.Split(o.Addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
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
	addrs := o.Addrs()
	if len(addrs) == 0 {
		return nil, fmt.Errorf("clickhouse: no address")
	}
	var tlsConfig *tls.Config
	if o.TLS {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		if o.TLSCA != "" {
			pem, err := os.ReadFile(o.TLSCA)
			if err != nil {
				return nil, fmt.Errorf("clickhouse: TLS authorities: %w", err)
			}
			tlsConfig.RootCAs = x509.NewCertPool()
			if !tlsConfig.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("clickhouse: TLS authorities: no certificate in %s", o.TLSCA)
			}
		}
	}
	return ch.Open(&ch.Options{
		TLS:              tlsConfig,
		Protocol:         ch.Native,
		Addr:             addrs,
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

// EnsureDatabase creates o.Database when it does not exist: on every
// replica of o.Cluster when it is set (when the connected replica has it,
// nothing is sent to the cluster).
func EnsureDatabase(ctx context.Context, o Options) error {
	if !identRe.MatchString(o.Database) {
		return fmt.Errorf("clickhouse: database name %q is not a plain identifier", o.Database)
	}
	if o.Cluster != "" && !identRe.MatchString(o.Cluster) {
		return fmt.Errorf("clickhouse: cluster name %q is not a plain identifier", o.Cluster)
	}
	c, err := open(o, "default")
	if err != nil {
		return err
	}
	defer c.Close()
	timeout := 10 * time.Second
	if o.Cluster != "" {
		timeout += onClusterTimeout * time.Second // every replica runs it
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	q := "CREATE DATABASE IF NOT EXISTS " + o.Database
	if o.Cluster != "" {
		var n uint64
		if err := c.QueryRow(ctx, "SELECT count() FROM system.databases WHERE name = ?", o.Database).Scan(&n); err != nil {
			return fmt.Errorf("clickhouse: create database %s: %w", o.Database, err)
		}
		if n > 0 {
			return nil
		}
		q += " ON CLUSTER " + o.Cluster
		ctx = OnCluster(ctx)
	}
	if err := c.Exec(ctx, q); err != nil {
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

// Migrate applies every migration newer than the schema's version on one
// server (Schema.Migrate on a cluster).
func Migrate(ctx context.Context, c Conn, log *slog.Logger) (applied int, err error) {
	return Schema{}.Migrate(ctx, c, log)
}

// schemaMigrations is the migrator's record of the applied migrations; on a
// cluster, replicated like the other tables (Statement), so that every
// replica reads the same version.
const schemaMigrations = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version UInt32, name String, applied_at DateTime
	) ENGINE = MergeTree() ORDER BY version`

// Migrate applies every migration newer than the schema's version, each
// statement in its form for s (Statement). Each statement is idempotent
// (IF NOT EXISTS, or an ADD COLUMN skipped when the column exists), so two
// processes migrating at the same time, or one re-running a migration that
// failed half-way, converge on the same schema; on a cluster, ClickHouse
// runs the ON CLUSTER statements of every process one at a time, in one
// order, on every replica (its distributed DDL queue). A schema that is up
// to date sends nothing to the cluster: a process starts while a replica
// is down. A migration waits for every replica (at most onClusterTimeout a
// statement): one that is down makes it fail, to be retried.
func (s Schema) Migrate(ctx context.Context, c Conn, log *slog.Logger) (applied int, err error) {
	ms, err := Migrations()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if ok, err := tableExists(ctx, c, "schema_migrations"); err != nil {
		return 0, fmt.Errorf("clickhouse: schema_migrations: %w", err)
	} else if !ok {
		if err := s.exec(ctx, c, schemaMigrations); err != nil {
			return 0, fmt.Errorf("clickhouse: schema_migrations: %w", err)
		}
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
			if err := s.execStatement(ctx, c, st); err != nil {
				return applied, fmt.Errorf("clickhouse: migration %s statement %d: %w", m.Name, i+1, err)
			}
		}
		// Not deduplicated: two processes that record the same migration
		// in the same second insert the same block, which a replicated
		// table would keep only on the replica that got it first, and the
		// other process would not read its own record at once.
		b, err := c.PrepareBatch(ch.Context(ctx, ch.WithSettings(ch.Settings{"insert_deduplicate": 0})),
			"INSERT INTO schema_migrations (version, name, applied_at)")
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
			log.Info("clickhouse migration applied", "version", m.Version, "name", m.Name, "cluster", s.Cluster)
		}
	}
	return applied, nil
}

// onClusterTimeout bounds the wait of an ON CLUSTER statement for every
// replica to run it (distributed_ddl_task_timeout, 180 s by default). The
// statement stays in the queue of a replica that is down, which runs it
// when it is back.
const onClusterTimeout = 20

// OnCluster returns ctx for an ON CLUSTER statement: it waits at most
// onClusterTimeout seconds for every replica to run it.
func OnCluster(ctx context.Context) context.Context {
	return ch.Context(ctx, ch.WithSettings(ch.Settings{"distributed_ddl_task_timeout": onClusterTimeout}))
}

// exec runs statement st in its form for s.
func (s Schema) exec(ctx context.Context, c Conn, st string) error {
	q, err := s.Statement(st)
	if err != nil {
		return err
	}
	if s.Cluster != "" {
		ctx = OnCluster(ctx)
	}
	return c.Exec(ctx, q)
}

func tableExists(ctx context.Context, c Conn, table string) (bool, error) {
	var n uint64
	err := c.QueryRow(ctx, `SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = ?`, table).Scan(&n)
	return n > 0, err
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
func (s Schema) execStatement(ctx context.Context, c Conn, st string) error {
	m := addColumn.FindStringSubmatch(st)
	if m == nil {
		return s.exec(ctx, c, st)
	}
	has := func() (bool, error) {
		var n uint64
		err := c.QueryRow(ctx, `SELECT count() FROM system.columns
			WHERE database = currentDatabase() AND table = ? AND name = ?`, m[1], m[2]).Scan(&n)
		return n > 0, err
	}
	ok, err := has()
	if err != nil {
		return err
	}
	if !ok {
		if err = s.exec(ctx, c, st); err != nil {
			// Another process added it first: on a cluster, maybe through
			// another replica, whose change reaches this one a moment later.
			for wait := time.Duration(0); ; wait += 250 * time.Millisecond {
				if ok, _ := has(); ok {
					break
				}
				if s.Cluster == "" || wait >= 10*time.Second {
					return err
				}
				if retry.Sleep(ctx, 250*time.Millisecond) != nil {
					return err
				}
			}
		}
	}
	if s.Cluster == "" {
		return nil
	}
	// The ALTER reaches the other replicas through ZooKeeper, a moment
	// later; a statement ON CLUSTER that reads the column (a view) would
	// fail on a replica that does not have it yet: wait until every replica
	// has it.
	return s.waitColumnEverywhere(ctx, c, m[1], m[2])
}

// waitColumnEverywhere waits, at most onClusterTimeout, until every replica
// of the cluster has the column (system.columns of each, through remote()).
func (s Schema) waitColumnEverywhere(ctx context.Context, c Conn, table, column string) error {
	rows, err := c.Query(ctx, "SELECT host_name, port FROM system.clusters WHERE cluster = ?", s.Cluster)
	if err != nil {
		return err
	}
	var addrs []string
	for rows.Next() {
		var host string
		var port uint16
		if err := rows.Scan(&host, &port); err != nil {
			rows.Close()
			return err
		}
		addrs = append(addrs, net.JoinHostPort(host, strconv.Itoa(int(port))))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	q := "SELECT toUInt64(count()) FROM remote('" + strings.Join(addrs, ",") + "', system.columns) WHERE database = ? AND table = ? AND name = ?"
	deadline := time.Now().Add(onClusterTimeout * time.Second)
	for {
		var n uint64
		err := c.QueryRow(ctx, q, s.Database, table, column).Scan(&n)
		if err == nil && n >= uint64(len(addrs)) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err == nil {
				err = fmt.Errorf("%d of %d replicas have it", n, len(addrs))
			}
			return fmt.Errorf("clickhouse: column %s.%s not on every replica of %s: %w", table, column, s.Cluster, err)
		}
		if serr := retry.Sleep(ctx, 250*time.Millisecond); serr != nil {
			return fmt.Errorf("clickhouse: column %s.%s not on every replica of %s: %w", table, column, s.Cluster, serr)
		}
	}
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
// fresh memory (docs/design/clickhouse.md). Both settings exist on 18.16 and on
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

// CreateStage creates table name with the columns, partition key and
// sorting key of table like, as a plain MergeTree: a staging table private
// to one process, on the one server (or replica) it is connected to, from
// which ALTER TABLE like REPLACE PARTITION ... FROM name swaps partitions
// in. CREATE TABLE name AS like would copy like's engine: on a cluster, a
// Replicated one with like's own path in ZooKeeper, which the server
// refuses (the replica exists already). A REPLACE PARTITION into a
// replicated table needs no ON CLUSTER: ZooKeeper carries it to the other
// replicas, which fetch the new parts.
func CreateStage(ctx context.Context, c Conn, name, like string) error {
	if !identRe.MatchString(name) || !identRe.MatchString(like) {
		return fmt.Errorf("clickhouse: stage %q of %q: not plain identifiers", name, like)
	}
	var partition, sorting string
	if err := c.QueryRow(ctx, `SELECT partition_key, sorting_key FROM system.tables
		WHERE database = currentDatabase() AND name = ?`, like).Scan(&partition, &sorting); err != nil {
		return fmt.Errorf("clickhouse: keys of %s: %w", like, err)
	}
	q := "CREATE TABLE " + name + " AS " + like + " ENGINE = MergeTree()"
	if partition != "" {
		q += " PARTITION BY " + keyExpr(partition)
	}
	if sorting == "" {
		sorting = "tuple()"
	}
	q += " ORDER BY " + keyExpr(sorting)
	return c.Exec(ctx, q)
}

// keyExpr is a key as system.tables lists it ("a, b" for a tuple) written
// back as the table's DDL had it: a list in parentheses, one expression as
// it is. Current versions compare partition keys by their expression, and
// refuse REPLACE PARTITION between "PARTITION BY d" and "PARTITION BY (d)".
func keyExpr(key string) string {
	depth := 0
	for _, r := range key {
		switch r {
		case '(', '[':
			depth++
		case ')', ']':
			depth--
		case ',':
			if depth == 0 {
				return "(" + key + ")"
			}
		}
	}
	return key
}
