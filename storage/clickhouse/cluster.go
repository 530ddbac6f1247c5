package clickhouse

import (
	"fmt"
	"regexp"
	"strings"
)

// Schema says where the migrations create the schema: on one server (the
// zero value, Cluster empty), or on every replica of a cluster named in the
// servers' <remote_servers> (docs/design/clickhouse.md, Cluster mode).
//
// The migration files are written once, for one server. On a cluster,
// Statement rewrites each of them as it is run: every CREATE, ALTER and DROP
// gets ON CLUSTER, and every MergeTree-family engine its Replicated form,
// whose replicas share the path /clickhouse/tables/{shard}/<database>/<table>
// in ZooKeeper ({shard} and {replica} are the servers' macros).
type Schema struct {
	Cluster  string
	Database string
}

// Schema is the schema o's settings describe.
func (o Options) Schema() Schema { return Schema{Cluster: o.Cluster, Database: o.Database} }

// ReplicatedEngine is the engine clause of a replica of table t of
// s.Database: engine (MergeTree, ReplacingMergeTree...) in its Replicated
// form, the ZooKeeper path and replica name first, then args (engine's own
// arguments, "" for none).
func (s Schema) ReplicatedEngine(table, engine, args string) string {
	a := fmt.Sprintf("'/clickhouse/tables/{shard}/%s/%s', '{replica}'", s.Database, table)
	if strings.TrimSpace(args) != "" {
		a += ", " + strings.TrimSpace(args)
	}
	return "Replicated" + engine + "(" + a + ")"
}

var (
	// The statements a migration may hold, by their head: the name of the
	// object they create, change or drop ends the match.
	createTableRe = regexp.MustCompile(`(?is)^\s*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+\.)?(\w+)`)
	createViewRe  = regexp.MustCompile(`(?is)^\s*CREATE\s+VIEW\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+\.)?(\w+)`)
	createMVRe    = regexp.MustCompile(`(?is)^\s*CREATE\s+MATERIALIZED\s+VIEW\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+\.)?(\w+)`)
	alterTableRe  = regexp.MustCompile(`(?is)^\s*ALTER\s+TABLE\s+(\w+\.)?(\w+)`)
	dropRe        = regexp.MustCompile(`(?is)^\s*DROP\s+(?:TABLE|VIEW)\s+(?:IF\s+EXISTS\s+)?(\w+\.)?(\w+)\s*$`)
	insertRe      = regexp.MustCompile(`(?is)^\s*INSERT\s+INTO\s`)
	onClusterRe   = regexp.MustCompile(`(?i)\bON\s+CLUSTER\b`)
	// A MergeTree-family engine that is not replicated yet, with or without
	// its argument list.
	engineRe = regexp.MustCompile(`(?i)\bENGINE\s*=\s*(\w*MergeTree)\b`)
	// A table a view reads or writes: FROM t, JOIN t, TO t.
	sourceRe   = regexp.MustCompile(`(?i)\b(?:FROM|JOIN|TO)\s+([A-Za-z_]\w*)\b`)
	populateRe = regexp.MustCompile(`(?i)\bPOPULATE\b`)
)

// Statement is migration statement st as it runs on s: unchanged on one
// server; on a cluster, with ON CLUSTER and Replicated engines, the objects
// named with the database (a replica runs the statements of the cluster's
// queue in its default database). A statement the rewrite does not know is
// an error, so that a new kind of migration statement cannot silently create
// a table on one replica only.
//
// What it rewrites:
//   - CREATE TABLE t (...) ENGINE = XMergeTree(args) ... → CREATE TABLE
//     <db>.t ON CLUSTER c (...) ENGINE = ReplicatedXMergeTree(
//     '/clickhouse/tables/{shard}/<db>/t', '{replica}', args) ...; another
//     engine (Memory, Log, none) is refused: every table is replicated;
//   - CREATE VIEW v, DROP TABLE|VIEW t → <db>.v ON CLUSTER c: a view holds
//     no data, every replica needs its own; the tables it reads are named
//     <db>.t;
//   - CREATE MATERIALIZED VIEW v [TO t] [ENGINE = ...] → ON CLUSTER c, its
//     inner engine replicated (path of v); POPULATE is refused: each replica
//     would insert its own copy of the source into the replicated inner
//     table;
//   - ALTER TABLE t ... stays as it is: ZooKeeper carries it to every
//     replica of the (replicated) table;
//   - INSERT INTO ... stays as it is: it runs on one replica, replication
//     copies the rows.
func (s Schema) Statement(st string) (string, error) {
	if s.Cluster == "" {
		return st, nil
	}
	if !identRe.MatchString(s.Cluster) {
		return "", fmt.Errorf("clickhouse: cluster name %q is not a plain identifier", s.Cluster)
	}
	if !identRe.MatchString(s.Database) {
		return "", fmt.Errorf("clickhouse: database name %q is not a plain identifier", s.Database)
	}
	if onClusterRe.MatchString(st) {
		return "", fmt.Errorf("clickhouse: a migration statement says ON CLUSTER itself; the migrator adds it: %.80q", st)
	}
	onCluster := " ON CLUSTER " + s.Cluster
	// head names the object in st as <database>.<name> ON CLUSTER c: a
	// replica runs the statements of the cluster's queue in its default
	// database, not the one of the process that queued them.
	head := func(re *regexp.Regexp) (string, string) {
		m := re.FindStringSubmatchIndex(st)
		from := m[4]
		if m[2] >= 0 {
			from = m[2]
		}
		return st[:from] + s.Database + "." + st[m[4]:m[5]] + onCluster, st[m[1]:]
	}
	switch {
	case createMVRe.MatchString(st):
		if populateRe.MatchString(st) {
			return "", fmt.Errorf("clickhouse: CREATE MATERIALIZED VIEW ... POPULATE cannot run on a cluster (every replica would populate the replicated table): %.80q", st)
		}
		h, rest := head(createMVRe)
		return s.replicate(h+s.qualify(rest), createMVRe.FindStringSubmatch(st)[2])
	case createTableRe.MatchString(st):
		h, rest := head(createTableRe)
		return s.replicate(h+rest, createTableRe.FindStringSubmatch(st)[2])
	case createViewRe.MatchString(st):
		h, rest := head(createViewRe)
		return h + s.qualify(rest), nil
	case alterTableRe.MatchString(st):
		// Every table is replicated (CREATE TABLE refuses other engines):
		// ZooKeeper carries an ALTER to every replica. ON CLUSTER would add
		// nothing, and 18.16's DDL worker stops for good when two replicas
		// race to run an ALTER ON CLUSTER of a replicated table.
		return st, nil
	case dropRe.MatchString(st):
		h, _ := head(dropRe)
		return h, nil
	case insertRe.MatchString(st):
		return st, nil
	}
	return "", fmt.Errorf("clickhouse: the cluster form of this migration statement is not known (CREATE TABLE|VIEW|MATERIALIZED VIEW, ALTER TABLE, DROP TABLE|VIEW, INSERT INTO): %.80q", st)
}

// qualify names the tables a view's query reads (FROM t, JOIN t) and a
// materialized view writes (TO t) as <database>.t, for the replicas that
// create the view from the cluster's queue in their default database. A
// name followed by "." (already qualified) or "(" (a table function) is
// left as it is. It reads SQL as words: migrations' views say FROM only
// before a table or a subquery.
func (s Schema) qualify(q string) string {
	var b strings.Builder
	last := 0
	for _, m := range sourceRe.FindAllStringSubmatchIndex(q, -1) {
		next := strings.TrimLeft(q[m[3]:], " \t\n")
		if strings.HasPrefix(next, ".") || strings.HasPrefix(next, "(") {
			continue
		}
		b.WriteString(q[last:m[2]])
		b.WriteString(s.Database + ".")
		last = m[2]
	}
	b.WriteString(q[last:])
	return b.String()
}

// replicate turns the engine of a CREATE statement for table into its
// Replicated form, when it is a MergeTree-family engine that is not
// replicated yet. A CREATE TABLE with no engine (CREATE TABLE t AS u copies
// u's, ZooKeeper path included) is refused.
func (s Schema) replicate(st, table string) (string, error) {
	m := engineRe.FindStringSubmatchIndex(st)
	if m == nil {
		if createTableRe.MatchString(st) {
			return "", fmt.Errorf("clickhouse: CREATE TABLE %s on a cluster: the engine must be of the MergeTree family (replicated; a table without an engine would copy another's replication path)", table)
		}
		return st, nil
	}
	engine := st[m[2]:m[3]]
	if strings.HasPrefix(strings.ToLower(engine), "replicated") {
		return st, nil
	}
	rest := st[m[1]:]
	args, after := "", rest
	if t := strings.TrimLeft(rest, " \t\n"); strings.HasPrefix(t, "(") {
		end := closingParen(t)
		if end < 0 {
			return "", fmt.Errorf("clickhouse: unbalanced parentheses in the engine of %s", table)
		}
		args, after = t[1:end], t[end+1:]
	}
	return st[:m[0]] + "ENGINE = " + s.ReplicatedEngine(table, engine, args) + after, nil
}

// closingParen is the index of the parenthesis that closes s[0] (an
// opening one), or -1. Quoted strings are skipped.
func closingParen(s string) int {
	depth := 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"' || c == '`':
			quote = c
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}
