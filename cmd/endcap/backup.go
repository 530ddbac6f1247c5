package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/endcap/endcap/app"
)

// cmdBackup is `endcap admin backup create --to URL` and `endcap admin
// backup restore --from URL [--force]` (docs/operations/operations.md, Backup and
// restore).
func cmdBackup(ctx context.Context, verb string, args []string) error {
	if verb != "create" && verb != "restore" {
		return errors.New("usage: endcap admin backup create --to URL | restore --from URL [--force]")
	}
	var url string
	var force bool
	var timeout time.Duration
	cfg, _, err := parse("admin backup "+verb, args, func(fs *flag.FlagSet) {
		if verb == "create" {
			fs.StringVar(&url, "to", "", "where the backup goes: file:///path or s3://bucket/prefix (required); a backup already there is the base of an incremental one")
		} else {
			fs.StringVar(&url, "from", "", "the backup: file:///path or s3://bucket/prefix (required)")
			fs.BoolVar(&force, "force", false, "restore into a system that holds data (the backup's partitions, objects and keys replace those of the same name)")
		}
		fs.DurationVar(&timeout, "timeout", 10*time.Minute, "deadline of each step: one topic, one partition, one object")
	})
	if err != nil {
		return err
	}
	if url == "" {
		if verb == "create" {
			return errors.New("--to is required")
		}
		return errors.New("--from is required")
	}
	if timeout <= 0 {
		return fmt.Errorf("--timeout %s: must be positive", timeout)
	}
	log := newLogger(cfg, cfg.LogLevel)
	if verb == "create" {
		m, err := app.CreateBackup(ctx, cfg, url, app.BackupOptions{Timeout: timeout}, log)
		if err != nil {
			return err
		}
		return printJSON(os.Stdout, backupSummary(m))
	}
	rep, err := app.RestoreBackup(ctx, cfg, url, app.RestoreOptions{Force: force, Timeout: timeout}, log)
	if err != nil {
		return err
	}
	return printJSON(os.Stdout, rep)
}

// backupSummary is what `backup create` prints: the manifest's counts.
func backupSummary(m app.BackupManifest) any {
	type table struct {
		Name             string `json:"name"`
		Partitions       int    `json:"partitions"`
		PartitionsCopied int    `json:"partitionsCopied"`
		Rows             uint64 `json:"rows"`
	}
	type topic struct {
		Name string `json:"name"`
		Keys int    `json:"keys"`
	}
	out := struct {
		CreatedAt time.Time `json:"createdAt"`
		Took      string    `json:"took"`
		Bytes     int64     `json:"bytesWritten"`
		Reused    int64     `json:"bytesReused"`
		Topics    []topic   `json:"topics"`
		Tables    []table   `json:"tables"`
		Objects   int       `json:"objects"`
	}{CreatedAt: m.CreatedAt, Took: m.Took, Bytes: m.Bytes, Reused: m.Reused, Objects: len(m.S3.Objects)}
	for _, t := range m.Kafka.Topics {
		out.Topics = append(out.Topics, topic{t.Name, t.Keys})
	}
	for _, t := range m.ClickHouse.Tables {
		tb := table{Name: t.Name, Partitions: len(t.Partitions)}
		for _, p := range t.Partitions {
			tb.Rows += p.Rows
			if !p.Reused {
				tb.PartitionsCopied++
			}
		}
		out.Tables = append(out.Tables, tb)
	}
	return out
}
