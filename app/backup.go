package app

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/storage/backupstore"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/storage/s3store"
)

// A backup (docs/operations/operations.md, Backup and restore) is a directory or an S3
// prefix holding manifest.json and the files it names:
//
//   - state/<topic>.jsonl.gz: the last record of each key of a state topic,
//     read up to the high watermarks taken when the backup began;
//   - clickhouse/<table>/<partition id>-<parts>.native.gz: one partition of
//     a table in ClickHouse's Native format, gzip-compressed, named by the
//     partition's set of parts: a partition whose parts have not changed
//     since the previous backup at the same place is not copied again;
//   - s3/<n>: the objects of the bucket (export and report files);
//   - redis.json: the shared secrets Endcap keeps in Redis, as Redis holds
//     them (wrapped with the master key where one is configured).
//
// Redis spend and charge markers, and the event claims, are not copied:
// a restore rebuilds them from ClickHouse's copy (projections.Restore*), so
// that they agree with it.

// BackupFormat is the manifest's format.
const BackupFormat = 1

// BackupManifest describes a backup.
type BackupManifest struct {
	Format     int           `json:"format"`
	CreatedAt  time.Time     `json:"createdAt"`
	Took       string        `json:"took"`
	Kafka      BackupKafka   `json:"kafka"`
	ClickHouse BackupCH      `json:"clickhouse"`
	Redis      BackupRedis   `json:"redis"`
	S3         BackupObjects `json:"s3"`
	// Bytes is the size of the files this backup wrote; Reused, of those
	// it took from the previous backup at the same place.
	Bytes  int64 `json:"bytes"`
	Reused int64 `json:"reusedBytes"`
}

// BackupKafka is the state topics' part of a manifest.
type BackupKafka struct {
	EventsPartitions int32         `json:"eventsPartitions"`
	Topics           []BackupTopic `json:"topics"`
}

// BackupTopic is one state topic.
type BackupTopic struct {
	Name           string          `json:"name"` // without the topic prefix
	Partitions     int32           `json:"partitions"`
	HighWatermarks map[int32]int64 `json:"highWatermarks"`
	RecordsRead    int64           `json:"recordsRead"`
	Keys           int             `json:"keys"`
	BackupFile
}

// BackupFile is a file of the backup.
type BackupFile struct {
	File   string `json:"file"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// BackupCH is ClickHouse's part of a manifest.
type BackupCH struct {
	ServerVersion string        `json:"serverVersion"`
	SchemaVersion int           `json:"schemaVersion"`
	Tables        []BackupTable `json:"tables"`
}

// BackupTable is one table.
type BackupTable struct {
	Name       string            `json:"name"`
	Columns    []string          `json:"columns"`
	Types      []string          `json:"types"`
	Partitions []BackupPartition `json:"partitions"`
}

// BackupPartition is one partition of a table.
type BackupPartition struct {
	ID    string `json:"id"`
	Value string `json:"value"`
	Rows  uint64 `json:"rows"`
	// Parts names the partition's parts when it was copied.
	Parts  string `json:"parts"`
	Reused bool   `json:"reused,omitempty"` // the previous backup's file
	BackupFile
}

// BackupRedis is Redis's part of a manifest.
type BackupRedis struct {
	Spend string `json:"spend"`
	BackupFile
	Keys []string `json:"keys"`
}

// BackupObjects are the bucket's objects.
type BackupObjects struct {
	Bucket  string         `json:"bucket"`
	Objects []BackupObject `json:"objects"`
}

// BackupObject is one object of the bucket.
type BackupObject struct {
	Key  string `json:"key"`
	ETag string `json:"etag"`
	BackupFile
}

// stateTopics are the compacted topics a backup copies.
func stateTopics(t kafka.Topics) []string {
	return []string{t.Accounts, t.Entities, t.WebhookDeliveries}
}

// sharedSecretKeys are the Redis keys of the secrets the processes share.
var sharedSecretKeys = []string{bidKeyName, cursorKeyName}

const manifestName = "manifest.json"

// backupDeps are the clients of a backup or a restore.
type backupDeps struct {
	cfg    config.Config
	log    *slog.Logger
	topics kafka.Topics
	conn   kafka.Conn
	kcl    *kgo.Client
	ch     clickhouse.Conn
	chHTTP *clickhouse.HTTP
	rdb    redis.UniversalClient
	s3     *s3store.Store
	target backupstore.Target
}

func openBackupDeps(ctx context.Context, cfg config.Config, url string, log *slog.Logger) (*backupDeps, error) {
	d := &backupDeps{cfg: cfg, log: log, topics: kafka.TopicNames(cfg.KafkaTopicPrefix)}
	var err error
	if d.target, err = backupstore.Open(url, S3Options(cfg)); err != nil { // the URL names the bucket
		return nil, err
	}
	if d.conn, err = KafkaSecurity(cfg).Conn(ctx); err != nil {
		return nil, err
	}
	if d.kcl, err = kafka.NewClient(cfg.KafkaBrokers, log, d.conn.With(kgo.ClientID("endcap-backup"), kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))...); err != nil {
		return nil, err
	}
	if d.ch, err = clickhouse.Open(ClickHouseOptions(cfg)); err != nil {
		d.close()
		return nil, err
	}
	if d.chHTTP, err = clickhouse.OpenHTTP(clickhouse.HTTPOptions{URL: cfg.ClickHouseHTTPURL, Database: cfg.ClickHouseDatabase,
		User: cfg.ClickHouseUser, Password: cfg.ClickHousePassword, TLSCA: cfg.ClickHouseTLSCA}); err != nil {
		d.close()
		return nil, err
	}
	if d.rdb, err = OpenRedis(cfg); err != nil {
		d.close()
		return nil, err
	}
	d.s3 = s3store.Open(S3Options(cfg))
	return d, nil
}

func (d *backupDeps) close() {
	if d.kcl != nil {
		d.kcl.Close()
	}
	if d.ch != nil {
		_ = d.ch.Close()
	}
	if d.chHTTP != nil {
		d.chHTTP.Close()
	}
	if d.rdb != nil {
		_ = d.rdb.Close()
	}
}

// hashingReader counts and hashes what is read through it.
type hashingReader struct {
	r io.Reader
	h interface {
		io.Writer
		Sum([]byte) []byte
	}
	n int64
}

func newHashingReader(r io.Reader) *hashingReader { return &hashingReader{r: r, h: sha256.New()} }

func (h *hashingReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.n += int64(n)
	_, _ = h.h.Write(p[:n])
	return n, err
}

func (h *hashingReader) sum() string { return hex.EncodeToString(h.h.Sum(nil)) }

// put writes a file to the target and describes it.
func (d *backupDeps) put(ctx context.Context, name string, r io.Reader) (BackupFile, error) {
	hr := newHashingReader(r)
	if _, err := d.target.Put(ctx, name, hr); err != nil {
		return BackupFile{}, err
	}
	return BackupFile{File: name, Bytes: hr.n, SHA256: hr.sum()}, nil
}

// get opens a file of the backup; Close checks its size and hash.
func (d *backupDeps) get(ctx context.Context, f BackupFile) (io.ReadCloser, error) {
	rc, ok, err := d.target.Get(ctx, f.File)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("backup %s: file %s is missing", d.target, f.File)
	}
	return &checkedFile{hr: newHashingReader(rc), rc: rc, want: f, where: d.target.String()}, nil
}

type checkedFile struct {
	hr    *hashingReader
	rc    io.ReadCloser
	want  BackupFile
	where string
}

func (c *checkedFile) Read(p []byte) (int, error) { return c.hr.Read(p) }

// Close reads what is left and checks the file.
func (c *checkedFile) Close() error {
	_, err := io.Copy(io.Discard, c.hr)
	if cerr := c.rc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if c.hr.n != c.want.Bytes || c.hr.sum() != c.want.SHA256 {
		return fmt.Errorf("backup %s: file %s is not the one the manifest describes (%d bytes, sha256 %s; want %d, %s)",
			c.where, c.want.File, c.hr.n, c.hr.sum(), c.want.Bytes, c.want.SHA256)
	}
	return nil
}

// readManifest reads the manifest of a backup; ok is false when there is
// none.
func (d *backupDeps) readManifest(ctx context.Context) (BackupManifest, bool, error) {
	var m BackupManifest
	rc, ok, err := d.target.Get(ctx, manifestName)
	if err != nil || !ok {
		return m, ok, err
	}
	defer rc.Close()
	if err := json.NewDecoder(io.LimitReader(rc, 256<<20)).Decode(&m); err != nil {
		return m, false, fmt.Errorf("backup %s: %s: %w", d.target, manifestName, err)
	}
	if m.Format != BackupFormat {
		return m, false, fmt.Errorf("backup %s: manifest format %d, this build reads %d", d.target, m.Format, BackupFormat)
	}
	return m, true, nil
}

// stateRecord is a line of a state topic's file.
type stateRecord struct {
	Partition int32         `json:"p"`
	Key       []byte        `json:"k"`
	Value     []byte        `json:"v"`
	Timestamp int64         `json:"t"` // Unix ms
	Headers   []stateHeader `json:"h,omitempty"`
}

type stateHeader struct {
	Key   string `json:"k"`
	Value []byte `json:"v"`
}

// gzipJSONLines streams values as gzip-compressed JSON lines.
func gzipJSONLines[T any](items []T, encode func(T) any) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		zw := gzip.NewWriter(pw)
		enc := json.NewEncoder(zw)
		for _, it := range items {
			if err := enc.Encode(encode(it)); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(zw.Close())
	}()
	return pr
}

// BackupOptions are the options of CreateBackup.
type BackupOptions struct {
	// Timeout bounds each step's calls: the read of one topic, the copy of
	// one partition or object.
	Timeout time.Duration
}

// CreateBackup writes a backup of cfg's system to url (file:///path or
// s3://bucket/prefix), incremental over the backup already there, and
// returns its manifest.
func CreateBackup(ctx context.Context, cfg config.Config, url string, o BackupOptions, log *slog.Logger) (BackupManifest, error) {
	start := time.Now()
	m := BackupManifest{Format: BackupFormat, CreatedAt: start.UTC().Truncate(time.Millisecond)}
	step := o.Timeout
	if step <= 0 {
		step = 10 * time.Minute
	}
	d, err := openBackupDeps(ctx, cfg, url, log)
	if err != nil {
		return m, err
	}
	defer d.close()
	sctx, cancel := context.WithTimeout(ctx, step)
	prev, hasPrev, err := d.readManifest(sctx)
	cancel()
	if err != nil {
		return m, err
	}

	// 1. The state topics, up to the high watermarks taken now.
	sctx, cancel = context.WithTimeout(ctx, step)
	ends, err := kafka.EndOffsets(sctx, d.kcl, d.topics.Events)
	cancel()
	if err != nil {
		return m, fmt.Errorf("kafka: topic %s (ENDCAP_KAFKA_TOPIC_PREFIX %q): %w", d.topics.Events, cfg.KafkaTopicPrefix, err)
	}
	m.Kafka.EventsPartitions = int32(len(ends))
	for _, topic := range stateTopics(d.topics) {
		sctx, cancel := context.WithTimeout(ctx, step)
		snap, err := kafka.ReadSnapshot(sctx, cfg.KafkaBrokers, log, topic, d.conn.With(kgo.ClientID("endcap-backup"))...)
		if err != nil {
			cancel()
			return m, err
		}
		name := strings.TrimPrefix(topic, cfg.KafkaTopicPrefix)
		f, err := d.put(sctx, "state/"+name+".jsonl.gz", gzipJSONLines(snap.Records, func(r *kgo.Record) any {
			sr := stateRecord{Partition: r.Partition, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp.UnixMilli()}
			for _, h := range r.Headers {
				sr.Headers = append(sr.Headers, stateHeader{h.Key, h.Value})
			}
			return sr
		}))
		cancel()
		if err != nil {
			return m, err
		}
		m.Kafka.Topics = append(m.Kafka.Topics, BackupTopic{Name: name, Partitions: snap.Partitions, HighWatermarks: snap.Ends,
			RecordsRead: snap.Read, Keys: len(snap.Records), BackupFile: f})
		m.Bytes += f.Bytes
		log.Info("backup: state topic copied", "topic", topic, "keys", len(snap.Records), "bytes", f.Bytes)
	}

	// 2. ClickHouse, partition by partition.
	if err := d.backupClickHouse(ctx, &m, prev, hasPrev, step); err != nil {
		return m, err
	}

	// 3. Redis: the shared secrets (spend and markers are rebuilt at
	// restore from the charges).
	m.Redis.Spend = "not copied: rebuilt at restore from the ClickHouse table charges (and the charge markers from charges_raw)"
	sctx, cancel = context.WithTimeout(ctx, step)
	vals, err := d.rdb.MGet(sctx, sharedSecretKeys...).Result()
	cancel()
	if err != nil {
		return m, fmt.Errorf("redis: %w", err)
	}
	secrets := map[string]string{}
	for i, v := range vals {
		if s, ok := v.(string); ok {
			secrets[sharedSecretKeys[i]] = s
			m.Redis.Keys = append(m.Redis.Keys, sharedSecretKeys[i])
		}
	}
	b, _ := json.Marshal(secrets)
	sctx, cancel = context.WithTimeout(ctx, step)
	m.Redis.BackupFile, err = d.put(sctx, "redis.json", strings.NewReader(string(b)))
	cancel()
	if err != nil {
		return m, err
	}
	m.Bytes += m.Redis.Bytes

	// 4. The bucket's objects.
	if err := d.backupObjects(ctx, &m, prev, step); err != nil {
		return m, err
	}

	m.Took = time.Since(start).Round(time.Millisecond).String()
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, err
	}
	sctx, cancel = context.WithTimeout(ctx, step)
	defer cancel()
	if _, err := d.target.Put(sctx, manifestName, strings.NewReader(string(mb)+"\n")); err != nil {
		return m, err
	}
	return m, nil
}

// chTable is a table of the database as system.tables describes it.
type chTable struct {
	name, partitionKey string
}

// backupTables are the tables a backup copies: every table of the MergeTree
// family but the migrator's own (views are the migrations' to create).
func backupTables(ctx context.Context, ch clickhouse.Conn, db string) ([]chTable, error) {
	rows, err := ch.Query(ctx, `SELECT name, partition_key FROM system.tables
		WHERE database = ? AND engine LIKE '%MergeTree' AND name != 'schema_migrations' AND NOT startsWith(name, '.') ORDER BY name`, db)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: list the tables: %w", err)
	}
	defer rows.Close()
	var out []chTable
	for rows.Next() {
		var t chTable
		if err := rows.Scan(&t.name, &t.partitionKey); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// chPartition is a partition as system.parts describes it.
type chPartition struct {
	id, value, parts string
	names            []string
	rows             uint64
}

func tableParts(ctx context.Context, ch clickhouse.Conn, db, table string) ([]chPartition, error) {
	rows, err := ch.Query(ctx, `SELECT partition_id, any(partition), toUInt64(sum(rows)), arraySort(groupArray(name))
		FROM system.parts WHERE database = ? AND table = ? AND active GROUP BY partition_id ORDER BY partition_id`, db, table)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: parts of %s: %w", table, err)
	}
	defer rows.Close()
	var out []chPartition
	for rows.Next() {
		var p chPartition
		if err := rows.Scan(&p.id, &p.value, &p.rows, &p.names); err != nil {
			return nil, err
		}
		h := sha256.Sum256([]byte(strings.Join(p.names, ",")))
		p.parts = hex.EncodeToString(h[:8])
		out = append(out, p)
	}
	return out, rows.Err()
}

func tableColumns(ctx context.Context, ch clickhouse.Conn, db, table string) (names, types []string, err error) {
	rows, err := ch.Query(ctx, `SELECT name, type FROM system.columns
		WHERE database = ? AND table = ? AND default_kind NOT IN ('MATERIALIZED', 'ALIAS')`, db, table)
	if err != nil {
		return nil, nil, fmt.Errorf("clickhouse: columns of %s: %w", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var n, t string
		if err := rows.Scan(&n, &t); err != nil {
			return nil, nil, err
		}
		names, types = append(names, n), append(types, t)
	}
	return names, types, rows.Err()
}

func quoteString(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
}

func columnList(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = clickhouse.QuoteIdent(c)
	}
	return strings.Join(q, ", ")
}

// backupClickHouse copies every partition whose parts changed since prev.
// A partition is read from the parts listed for it (`_part IN`), and kept
// only when those parts were all still there once it was read (a merge in
// between replaces some: the partition is listed and read again).
func (d *backupDeps) backupClickHouse(ctx context.Context, m *BackupManifest, prev BackupManifest, hasPrev bool, step time.Duration) error {
	db := d.cfg.ClickHouseDatabase
	sctx, cancel := context.WithTimeout(ctx, step)
	defer cancel()
	if err := d.ch.QueryRow(sctx, "SELECT version()").Scan(&m.ClickHouse.ServerVersion); err != nil {
		return fmt.Errorf("clickhouse: %w", err)
	}
	var err error
	if m.ClickHouse.SchemaVersion, err = clickhouse.SchemaVersion(sctx, d.ch); err != nil {
		return err
	}
	tables, err := backupTables(sctx, d.ch, db)
	if err != nil {
		return err
	}
	prevParts := map[string]BackupPartition{}
	prevCols := map[string]string{}
	if hasPrev {
		for _, t := range prev.ClickHouse.Tables {
			prevCols[t.Name] = strings.Join(t.Types, ",") + "|" + strings.Join(t.Columns, ",")
			for _, p := range t.Partitions {
				prevParts[t.Name+"/"+p.ID] = p
			}
		}
	}
	cancel()
	for _, t := range tables {
		tctx, cancel := context.WithTimeout(ctx, step)
		cols, types, err := tableColumns(tctx, d.ch, db, t.name)
		cancel()
		if err != nil {
			return err
		}
		bt := BackupTable{Name: t.name, Columns: cols, Types: types}
		sameCols := prevCols[t.name] == strings.Join(types, ",")+"|"+strings.Join(cols, ",")
		copied := map[string]BackupPartition{} // this backup's copies, kept when another partition is read again
		for attempt := 0; ; attempt++ {
			tctx, cancel := context.WithTimeout(ctx, step)
			parts, err := tableParts(tctx, d.ch, db, t.name)
			cancel()
			if err != nil {
				return err
			}
			bt.Partitions, err = d.backupPartitions(ctx, t, cols, parts, prevParts, copied, sameCols, step)
			if err == nil {
				break
			}
			if !errors.Is(err, errPartsMoved) || attempt == 5 {
				return err
			}
		}
		for _, p := range bt.Partitions {
			if p.Reused {
				m.Reused += p.Bytes
			} else {
				m.Bytes += p.Bytes
			}
		}
		m.ClickHouse.Tables = append(m.ClickHouse.Tables, bt)
	}
	return nil
}

var errPartsMoved = errors.New("the partition's parts were merged while it was read")

func (d *backupDeps) backupPartitions(ctx context.Context, t chTable, cols []string, parts []chPartition,
	prevParts, copied map[string]BackupPartition, sameCols bool, step time.Duration) ([]BackupPartition, error) {
	var out []BackupPartition
	for _, p := range parts {
		if done, ok := copied[p.id]; ok && done.Parts == p.parts && done.Rows == p.rows {
			out = append(out, done)
			continue
		}
		if old, ok := prevParts[t.name+"/"+p.id]; ok && sameCols && old.Parts == p.parts && old.Rows == p.rows {
			old.Reused = true
			out = append(out, old)
			continue
		}
		names := make([]string, len(p.names))
		for i, n := range p.names {
			names[i] = quoteString(n)
		}
		in := "_part IN (" + strings.Join(names, ", ") + ")"
		pctx, cancel := context.WithTimeout(ctx, step)
		body, err := d.chHTTP.SelectGzip(pctx, "SELECT "+columnList(cols)+" FROM "+clickhouse.QuoteIdent(t.name)+" WHERE "+in+
			" FORMAT Native")
		if err != nil {
			cancel()
			return nil, err
		}
		f, err := d.put(pctx, "clickhouse/"+t.name+"/"+p.id+"-"+p.parts+".native.gz", body)
		body.Close()
		if err != nil {
			cancel()
			return nil, err
		}
		var still uint64
		err = d.ch.QueryRow(pctx, "SELECT count() FROM "+clickhouse.QuoteIdent(t.name)+" WHERE "+in).Scan(&still)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("clickhouse: %s: %w", t.name, err)
		}
		if still != p.rows {
			return nil, errPartsMoved
		}
		bp := BackupPartition{ID: p.id, Value: p.value, Rows: p.rows, Parts: p.parts, BackupFile: f}
		copied[p.id] = bp
		out = append(out, bp)
		d.log.Info("backup: partition copied", "table", t.name, "partition", p.id, "rows", p.rows, "bytes", f.Bytes)
	}
	return out, nil
}

// backupObjects copies the bucket's objects; one whose ETag is the one the
// previous backup copied is not copied again.
func (d *backupDeps) backupObjects(ctx context.Context, m *BackupManifest, prev BackupManifest, step time.Duration) error {
	m.S3.Bucket = d.cfg.S3Bucket
	sctx, cancel := context.WithTimeout(ctx, step)
	objs, err := d.s3.List(sctx, "")
	cancel()
	if errors.Is(err, s3store.ErrNoBucket) {
		return nil // nothing exported yet
	}
	if err != nil {
		return err
	}
	prevObj := map[string]BackupObject{}
	for _, o := range prev.S3.Objects {
		prevObj[o.Key] = o
	}
	for i, o := range objs {
		if old, ok := prevObj[o.Key]; ok && old.ETag == o.ETag && old.Bytes == o.Size {
			m.S3.Objects = append(m.S3.Objects, old)
			m.Reused += old.Bytes
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, step)
		obj, ok, err := d.s3.Get(sctx, o.Key)
		if err != nil || !ok {
			cancel()
			if err == nil {
				continue // removed meanwhile
			}
			return err
		}
		h := sha256.Sum256([]byte(o.Key + "\x00" + o.ETag))
		f, err := d.put(sctx, fmt.Sprintf("s3/%05d-%s", i, hex.EncodeToString(h[:8])), obj.Body)
		obj.Body.Close()
		cancel()
		if err != nil {
			return err
		}
		m.S3.Objects = append(m.S3.Objects, BackupObject{Key: o.Key, ETag: o.ETag, BackupFile: f})
		m.Bytes += f.Bytes
	}
	return nil
}

// RestoreOptions are the options of RestoreBackup.
type RestoreOptions struct {
	// Force restores into a system that holds data: the backup's state
	// records are appended over what the topics hold, its partitions
	// replace the tables' partitions of the same id, its objects and
	// Redis keys replace those of the same name.
	Force bool
	// Timeout bounds each step's calls.
	Timeout time.Duration
}

// RestoreReport says what a restore did.
type RestoreReport struct {
	StateRecords int    `json:"stateRecords"`
	Partitions   int    `json:"partitions"`
	Rows         uint64 `json:"rows"`
	Objects      int    `json:"objects"`
	Claims       int    `json:"claims"`
	Markers      int    `json:"markers"`
	SpendFixed   int    `json:"spendCountersSet"`
	Took         string `json:"took"`
}

// ErrTargetNotEmpty is returned by RestoreBackup when the target holds data
// and Force is not set.
var ErrTargetNotEmpty = errors.New("the target system is not empty")

// RestoreBackup restores the backup at url into cfg's system: its state
// topics, ClickHouse tables, bucket and Redis secrets, then rebuilds from
// ClickHouse's copy the event claims, the charge markers and the spend.
// The events fold must not be running on the target (its consumer group
// must have no member): start the target's processes after the restore.
func RestoreBackup(ctx context.Context, cfg config.Config, url string, o RestoreOptions, log *slog.Logger) (RestoreReport, error) {
	start := time.Now()
	var rep RestoreReport
	step := o.Timeout
	if step <= 0 {
		step = 10 * time.Minute
	}
	d, err := openBackupDeps(ctx, cfg, url, log)
	if err != nil {
		return rep, err
	}
	defer d.close()
	sctx, cancel := context.WithTimeout(ctx, step)
	defer cancel()
	m, ok, err := d.readManifest(sctx)
	if err != nil {
		return rep, err
	}
	if !ok {
		return rep, fmt.Errorf("no backup at %s (no %s)", url, manifestName)
	}

	// The target: topics and schema made, nothing folding, nothing in it.
	if err := kafka.EnsureTopics(sctx, d.kcl, kafka.Specs(d.topics, cfg.KafkaEventsPartitions, cfg.KafkaReplicationFactor, cfg.KafkaEventsRetention, cfg.KafkaAuctionsRetention)); err != nil {
		return rep, fmt.Errorf("kafka: %w", err)
	}
	if err := projections.EnsureClaimsTopic(sctx, d.kcl, d.topics.Events, d.topics.Claims, max(cfg.KafkaReplicationFactor, 1), projections.ClaimsRetention(cfg.DedupeWindow)); err != nil {
		return rep, err
	}
	ends, err := kafka.EndOffsets(sctx, d.kcl, d.topics.Events)
	if err != nil {
		return rep, fmt.Errorf("kafka: %w", err)
	}
	if int32(len(ends)) != m.Kafka.EventsPartitions {
		return rep, fmt.Errorf("the target's events topic has %d partitions, the backup's had %d: they must be the same (a client's retry lands on its first copy's partition; ENDCAP_KAFKA_EVENTS_PARTITIONS)",
			len(ends), m.Kafka.EventsPartitions)
	}
	groups, err := kadm.NewClient(d.kcl).DescribeGroups(sctx, projections.EventsGroup)
	if err != nil {
		return rep, fmt.Errorf("kafka: %w", err)
	}
	for _, g := range groups {
		if len(g.Members) > 0 {
			return rep, fmt.Errorf("the events fold is running on the target (consumer group %s has %d members): stop the target's projectors, restore, then start them", projections.EventsGroup, len(g.Members))
		}
	}
	co := ClickHouseOptions(cfg)
	if err := clickhouse.EnsureDatabase(sctx, co); err != nil {
		return rep, err
	}
	if _, err := co.Schema().Migrate(sctx, d.ch, log); err != nil {
		return rep, err
	}
	v, err := clickhouse.SchemaVersion(sctx, d.ch)
	if err != nil {
		return rep, err
	}
	if v < m.ClickHouse.SchemaVersion {
		return rep, fmt.Errorf("the backup's ClickHouse schema is version %d, this build's %d: restore with a build at least as new as the one that made it", m.ClickHouse.SchemaVersion, v)
	}
	secrets, clash, err := d.readSecrets(sctx, m.Redis)
	if err != nil {
		return rep, err
	}
	if problems, err := d.nonEmpty(sctx); err != nil {
		return rep, err
	} else if problems = append(problems, clash...); len(problems) > 0 && !o.Force {
		return rep, fmt.Errorf("%w (%s): restore into an empty system, or give --force to restore over it", ErrTargetNotEmpty, strings.Join(problems, "; "))
	}
	cancel()

	// 1. The state topics: each record to its partition, as it was.
	for _, t := range m.Kafka.Topics {
		n, err := d.restoreTopic(ctx, cfg.KafkaTopicPrefix+t.Name, t, step)
		if err != nil {
			return rep, err
		}
		rep.StateRecords += n
	}
	// 2. ClickHouse.
	for _, t := range m.ClickHouse.Tables {
		for _, p := range t.Partitions {
			if err := d.restorePartition(ctx, t, p, o.Force, step); err != nil {
				return rep, err
			}
			rep.Partitions++
			rep.Rows += p.Rows
		}
	}
	// 3. The bucket's objects.
	if err := d.s3.EnsureBucket(ctx); err != nil {
		return rep, err
	}
	for _, ob := range m.S3.Objects {
		if err := d.restoreObject(ctx, ob, step); err != nil {
			return rep, err
		}
		rep.Objects++
	}
	// 4. Redis: the shared secrets, then what is rebuilt from ClickHouse.
	if err := d.restoreSecrets(ctx, secrets, step); err != nil {
		return rep, err
	}
	now := time.Now()
	sctx, cancel = context.WithTimeout(ctx, step)
	defer cancel()
	if rep.Claims, err = projections.RestoreClaims(sctx, d.ch, d.kcl, d.topics.Claims, cfg.DedupeWindow, now); err != nil {
		return rep, err
	}
	if rep.Markers, err = projections.RestoreMarkers(sctx, d.ch, d.rdb, cfg.WaitReplicas(), now); err != nil {
		return rep, err
	}
	mps, err := chargedMarketplaces(sctx, d.ch)
	if err != nil {
		return rep, err
	}
	for _, mp := range mps {
		diffs, err := projections.ReconcileSpend(sctx, d.ch, d.rdb, mp, now, true)
		if err != nil {
			return rep, err
		}
		rep.SpendFixed += len(diffs)
	}
	rep.Took = time.Since(start).Round(time.Millisecond).String()
	return rep, nil
}

func chargedMarketplaces(ctx context.Context, ch clickhouse.Conn) ([]string, error) {
	rows, err := ch.Query(ctx, "SELECT DISTINCT toString(marketplace_id) FROM charges_raw")
	if err != nil {
		return nil, fmt.Errorf("clickhouse: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var mp string
		if err := rows.Scan(&mp); err != nil {
			return nil, err
		}
		out = append(out, mp)
	}
	return out, rows.Err()
}

// nonEmpty lists what the target already holds.
func (d *backupDeps) nonEmpty(ctx context.Context) ([]string, error) {
	var out []string
	for _, topic := range stateTopics(d.topics) {
		ends, err := kafka.EndOffsets(ctx, d.kcl, topic)
		if err != nil {
			return nil, fmt.Errorf("kafka: %w", err)
		}
		var n int64
		for _, e := range ends {
			n += e
		}
		if n > 0 {
			out = append(out, fmt.Sprintf("topic %s has %d records", topic, n))
		}
	}
	rows, err := d.ch.Query(ctx, `SELECT table, toUInt64(sum(rows)) FROM system.parts WHERE database = ? AND active AND table != 'schema_migrations'
		GROUP BY table HAVING sum(rows) > 0 ORDER BY table`, d.cfg.ClickHouseDatabase)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var t string
		var n uint64
		if err := rows.Scan(&t, &n); err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("table %s has %d rows", t, n))
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	objs, err := d.s3.List(ctx, "")
	if err != nil && !errors.Is(err, s3store.ErrNoBucket) {
		return nil, err
	}
	if len(objs) > 0 {
		out = append(out, fmt.Sprintf("bucket %s has %d objects", d.cfg.S3Bucket, len(objs)))
	}
	return out, nil
}

func (d *backupDeps) restoreTopic(ctx context.Context, topic string, t BackupTopic, step time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, step)
	defer cancel()
	ends, err := kafka.EndOffsets(ctx, d.kcl, topic)
	if err != nil {
		return 0, fmt.Errorf("kafka: %w", err)
	}
	if int32(len(ends)) < t.Partitions {
		return 0, fmt.Errorf("topic %s has %d partitions, the backup's had %d", topic, len(ends), t.Partitions)
	}
	rc, err := d.get(ctx, t.BackupFile)
	if err != nil {
		return 0, err
	}
	zr, err := gzip.NewReader(rc)
	if err != nil {
		rc.Close()
		return 0, fmt.Errorf("backup: %s: %w", t.File, err)
	}
	dec := json.NewDecoder(zr)
	n := 0
	var batch []*kgo.Record
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := d.kcl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			return fmt.Errorf("kafka: %s: %w", topic, err)
		}
		n += len(batch)
		batch = batch[:0]
		return nil
	}
	for {
		var sr stateRecord
		if err := dec.Decode(&sr); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			rc.Close()
			return n, fmt.Errorf("backup: %s: %w", t.File, err)
		}
		r := &kgo.Record{Topic: topic, Partition: sr.Partition, Key: sr.Key, Value: sr.Value, Timestamp: time.UnixMilli(sr.Timestamp)}
		for _, h := range sr.Headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		batch = append(batch, r)
		if len(batch) == 5_000 {
			if err := flush(); err != nil {
				rc.Close()
				return n, err
			}
		}
	}
	if err := flush(); err != nil {
		rc.Close()
		return n, err
	}
	if err := rc.Close(); err != nil {
		return n, err
	}
	if n != t.Keys {
		return n, fmt.Errorf("backup: %s holds %d records, the manifest says %d", t.File, n, t.Keys)
	}
	d.log.Info("restore: state topic restored", "topic", topic, "records", n)
	return n, nil
}

func (d *backupDeps) restorePartition(ctx context.Context, t BackupTable, p BackupPartition, force bool, step time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, step)
	defer cancel()
	table := clickhouse.QuoteIdent(t.Name)
	cols, _, err := tableColumns(ctx, d.ch, d.cfg.ClickHouseDatabase, t.Name)
	if err != nil {
		return err
	}
	for _, c := range t.Columns {
		if !slices.Contains(cols, c) {
			return fmt.Errorf("clickhouse: table %s has no column %s, which the backup has", t.Name, c)
		}
	}
	if force {
		if err := d.ch.Exec(ctx, "ALTER TABLE "+table+" DROP PARTITION ID "+quoteString(p.ID)); err != nil {
			return fmt.Errorf("clickhouse: %s: drop partition %s: %w", t.Name, p.ID, err)
		}
	}
	rc, err := d.get(ctx, p.BackupFile)
	if err != nil {
		return err
	}
	err = d.chHTTP.InsertGzip(ctx, "INSERT INTO "+table+" ("+columnList(t.Columns)+") FORMAT Native", struct{ io.Reader }{rc})
	if cerr := rc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("clickhouse: %s: partition %s: %w", t.Name, p.ID, err)
	}
	var rows uint64
	if err := d.ch.QueryRow(ctx, "SELECT toUInt64(sum(rows)) FROM system.parts WHERE database = ? AND table = ? AND partition_id = ? AND active",
		d.cfg.ClickHouseDatabase, t.Name, p.ID).Scan(&rows); err != nil {
		return fmt.Errorf("clickhouse: %s: %w", t.Name, err)
	}
	if rows != p.Rows {
		return fmt.Errorf("clickhouse: %s: partition %s holds %d rows after the restore, the backup %d", t.Name, p.ID, rows, p.Rows)
	}
	return nil
}

func (d *backupDeps) restoreObject(ctx context.Context, o BackupObject, step time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, step)
	defer cancel()
	rc, err := d.get(ctx, o.BackupFile)
	if err != nil {
		return err
	}
	up, err := d.s3.NewUpload(ctx, o.Key, "", nil, 0)
	if err != nil {
		rc.Close()
		return err
	}
	if _, err := io.Copy(up, rc); err != nil {
		up.Abort()
		rc.Close()
		return fmt.Errorf("s3: restore %s: %w", o.Key, err)
	}
	if err := rc.Close(); err != nil {
		up.Abort()
		return err
	}
	_, err = up.Complete()
	return err
}

// readSecrets reads the backup's Redis secrets, and lists those Redis
// already holds with another value.
func (d *backupDeps) readSecrets(ctx context.Context, r BackupRedis) (map[string]string, []string, error) {
	rc, err := d.get(ctx, r.BackupFile)
	if err != nil {
		return nil, nil, err
	}
	var secrets map[string]string
	err = json.NewDecoder(rc).Decode(&secrets)
	if cerr := rc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, fmt.Errorf("backup: %s: %w", r.File, err)
	}
	var clash []string
	for _, k := range sharedSecretKeys {
		v, ok := secrets[k]
		if !ok {
			continue
		}
		have, err := d.rdb.Get(ctx, k).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("redis: %s: %w", k, err)
		}
		if have != v {
			clash = append(clash, "Redis key "+k+" holds another secret")
		}
	}
	return secrets, clash, nil
}

// restoreSecrets writes the backup's Redis secrets.
func (d *backupDeps) restoreSecrets(ctx context.Context, secrets map[string]string, step time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, step)
	defer cancel()
	for _, k := range sharedSecretKeys {
		if v, ok := secrets[k]; ok {
			if err := d.rdb.Set(ctx, k, v, 0).Err(); err != nil {
				return fmt.Errorf("redis: %s: %w", k, err)
			}
		}
	}
	return nil
}
