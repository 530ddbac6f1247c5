package clickhouse

import (
	"testing"
)

// TestStringLayout fails when clickhouse-go's column.String is no longer the
// struct ReserveStrings reaches into: after an upgrade, check that the
// buffer is still a proto.ColStr and update the check (or drop
// ReserveStrings if clickhouse-go can now size a column itself).
func TestStringLayout(t *testing.T) {
	if stringLayout == noLayout {
		t.Fatal("column.String changed layout: ReserveStrings sizes nothing (see its comment)")
	}
}
