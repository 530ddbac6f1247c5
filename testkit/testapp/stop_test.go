package testapp_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testapp"
)

// openNamesFiles lists the files under dir whose name starts with "names-"
// (the catalog's names index) that the process has open, deleted or not.
func openNamesFiles(t *testing.T, dir string) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	var open []string
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir+"/") && strings.HasPrefix(filepath.Base(strings.TrimSuffix(target, " (deleted)")), "names-") {
			open = append(open, target)
		}
	}
	return open
}

// A process that stops closes the catalog's names index (the console's
// product search) with the rest: no descriptor of its files stays open.
func TestStopClosesCatalogNames(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := testapp.Start(t, testapp.Target(app.TargetAPI), testapp.WithMarketplace("Names", "EUR", "UTC"),
		testapp.Configure(func(c *config.Config, _ []string) { c.CatalogDir = dir }))
	// About 100 kB of names: the index writes its first segment to disk.
	var ps []catalog.ProductInput
	for i := range 500 {
		id, name := fmt.Sprintf("p-%03d", i), fmt.Sprintf("Product %03d ", i)+strings.Repeat("long name ", 12)
		ps = append(ps, catalog.ProductInput{ID: &id, Name: &name, Vendors: []string{"v-1"}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := a.Catalog.UpsertProducts(ctx, a.Marketplace.ID, ps, true, statelog.MatchAny); err != nil {
		t.Fatal(err)
	}
	if found, _, err := a.Catalog.SearchProducts(ctx, a.Marketplace.ID, "", "product 123", 10); err != nil || len(found) != 1 {
		t.Fatalf("search: %d found, %v", len(found), err)
	}
	if open := openNamesFiles(t, dir); len(open) == 0 {
		t.Fatalf("no names file open under %s", dir)
	}
	a.Stop()
	if open := openNamesFiles(t, dir); len(open) > 0 {
		t.Errorf("after the process stopped, still open: %q", open)
	}
}
