package telemetry

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// No secret reaches a log line, wherever it is: message, string, error,
// group, a logger's own attributes; other text is left as it is.
func TestRedactedLogs(t *testing.T) {
	const pw, key = "ch-pa55word", "c3Vw-ZXJzZWNyZXQ"
	cases := []struct {
		name string
		log  func(buf *bytes.Buffer)
	}{
		{"message", func(b *bytes.Buffer) {
			NewRedactor([]string{pw}).Logger(NewLogger(b, "info", "text")).Info("dial with " + pw)
		}},
		{"string attribute", func(b *bytes.Buffer) {
			NewRedactor([]string{pw}).Logger(NewLogger(b, "info", "json")).Info("dial", "dsn", "clickhouse://u:"+pw+"@h")
		}},
		{"error", func(b *bytes.Buffer) {
			NewRedactor([]string{pw}).Logger(NewLogger(b, "info", "text")).Warn("dial", "err", fmt.Errorf("auth: %w", errors.New("bad "+pw)))
		}},
		{"group and With", func(b *bytes.Buffer) {
			l := NewRedactor([]string{pw, key}).Logger(NewLogger(b, "info", "json")).With("k", key).WithGroup("g")
			l.Info("x", "pw", pw)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			c.log(&b)
			out := b.String()
			if strings.Contains(out, pw) || strings.Contains(out, key) {
				t.Fatalf("a secret in the log: %s", out)
			}
			if !strings.Contains(out, Redacted) {
				t.Fatalf("nothing redacted: %s", out)
			}
		})
	}
	var b bytes.Buffer
	NewRedactor([]string{"ab"}).Logger(NewLogger(&b, "info", "text")).Info("abc")
	if !strings.Contains(b.String(), "abc") {
		t.Errorf("a value under four characters garbled the line: %s", b.String())
	}
}
