package app

import (
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/internal/masterkey"
)

// TestReadinessPerTarget: each target's /readyz checks only what that
// target needs, so that an outage of ClickHouse, Redis or S3 pulls no API
// replica from its load balancer (docs/operations/operations.md, Health).
func TestReadinessPerTarget(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := config.Default()
	cfg.SecretKey = masterkey.Generate()
	for _, tc := range []struct {
		target Target
		want   []string
	}{
		{TargetAPI, []string{"kafka", "state"}},
		{TargetProjector, []string{"clickhouse", "kafka", "projectors", "redis", "state"}},
		{TargetExporter, []string{"clickhouse", "kafka", "redis", "s3", "state"}},
		{TargetAll, []string{"clickhouse", "kafka", "projectors", "redis", "s3", "state"}},
	} {
		t.Run(string(tc.target), func(t *testing.T) {
			a, err := New(cfg, tc.target, quiet)
			if err != nil {
				t.Fatal(err)
			}
			defer a.close()
			var got []string
			for _, c := range a.checks() {
				got = append(got, c.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("checks %v, want %v", got, tc.want)
			}
		})
	}
}
