package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestProductionBuildLinksNoDevTools: the production binary (no build tag)
// links neither the local stack, nor the in-process broker, nor the load
// generator; the development build (-tags dev) has them. Neither links the
// test infrastructure (testkit/).
func TestProductionBuildLinksNoDevTools(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	dev := []string{"github.com/endcap/endcap/deploy/loadgen", "github.com/endcap/endcap/deploy/localstack", "github.com/twmb/franz-go/pkg/kfake"}
	for _, c := range []struct {
		tags string
		want bool
	}{{"", false}, {"dev", true}} {
		out, err := exec.Command("go", "list", "-tags", c.tags, "-deps", ".").CombinedOutput()
		if err != nil {
			t.Fatalf("go list -tags %q: %v\n%s", c.tags, err, out)
		}
		deps := "\n" + string(out)
		if strings.Contains(deps, "\ngithub.com/endcap/endcap/testkit") {
			t.Errorf("build with tags %q links test infrastructure (testkit/)", c.tags)
		}
		for _, p := range dev {
			if got := strings.Contains(deps, "\n"+p+"\n"); got != c.want {
				t.Errorf("build with tags %q links %s: %v, want %v", c.tags, p, got, c.want)
			}
		}
	}
}
