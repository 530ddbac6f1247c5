package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/testkit/testapp"
	"github.com/endcap/endcap/testkit/testenv"
)

// While S3 hangs (its server frozen with SIGSTOP: connections accepted,
// nothing answered): an export fails its attempts within the S3 deadlines
// and ends failed within seconds, not after ENDCAP_EXPORT_TIMEOUT; the
// process that runs exports reports `s3` not ready; an API process stays
// ready all along, and one that starts meanwhile becomes ready
// (docs/operations/operations.md, Health and Deadlines of the object store).
func TestS3FrozenDuringExport(t *testing.T) {
	cfg := exConfig(t)
	s3 := testenv.OwnS3(t)
	cfg.S3Endpoint, cfg.S3Region, cfg.S3AccessKey, cfg.S3SecretKey = s3.Endpoint, s3.Region, s3.AccessKey, s3.SecretKey
	cfg.S3ConnectTimeout, cfg.S3RequestTimeout, cfg.S3PartTimeout = time.Second, time.Second, 2*time.Second
	s := startSystem(t, cfg) // every target, exports included

	if err := s3.Freeze(); err != nil {
		t.Fatal(err)
	}
	defer s3.Thaw()
	frozen := time.Now()
	// An API process that starts while S3 hangs becomes ready.
	api := testapp.Start(t, testapp.WithConfig(cfg), testapp.Target(app.TargetAPI)).URL

	// The API process is probed four times a second until the test ends.
	var mu sync.Mutex
	var notReady []string
	probes, stopProbes := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for probes.Err() == nil {
			if st, body := testapp.Readyz(api); st != http.StatusOK {
				mu.Lock()
				notReady = append(notReady, fmt.Sprintf("%s: %d %s", time.Since(frozen).Round(time.Millisecond), st, body))
				mu.Unlock()
			}
			select {
			case <-probes.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	})

	id := exAccepted(t, exCreate(t, s, s.AdvancedKey, exRequest()))
	// Three attempts, each failing within a few request timeouts, and the
	// backoffs between them (1 s, 2 s).
	const bound = 30 * time.Second
	var v exView
	testenv.Eventually(t, bound, func() error {
		var r response
		v, r = exGet(t, s, s.AdvancedKey, id)
		if r.Status != http.StatusOK {
			t.Fatalf("GET %s: status %d: %s", id, r.Status, r.Body)
		}
		if v.Status != "failed" {
			return fmt.Errorf("export %s is %s after %s with S3 frozen", id, v.Status, time.Since(frozen).Round(time.Second))
		}
		return nil
	})
	if v.Error == nil || !strings.Contains(v.Error.Message, "s3") {
		t.Errorf("failed export's error: %+v", v.Error)
	}
	t.Logf("export failed %s after the freeze: %s", time.Since(frozen).Round(100*time.Millisecond), v.Error.Message)

	// The process that runs exports is not ready for want of S3.
	testenv.Eventually(t, 10*time.Second, func() error {
		st, body := testapp.Readyz(s.URL)
		if st != http.StatusServiceUnavailable || !strings.Contains(body, `"s3"`) {
			return fmt.Errorf("exporter /readyz %d %s", st, body)
		}
		return nil
	})
	stopProbes()
	wg.Wait()
	if len(notReady) > 0 {
		t.Errorf("the API process was not ready while S3 was frozen: %v", notReady)
	}
}
