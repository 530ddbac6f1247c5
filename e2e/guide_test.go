package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/endcap/endcap/testkit/testenv"
)

// guidePath is the guide that TestGuide runs.
const guidePath = "../docs/guide/README.md"

// guideStep is one `sh` block of the guide and the lines its output must
// contain (the `text` block after it).
type guideStep struct {
	line   int // of the block's opening fence
	script string
	want   []string
}

// parseGuide returns the guide's `sh` blocks in order, each with the
// `text` block that follows it (only blank lines between), if any. Other
// blocks (`console`, `json`…) are shown, not run.
func parseGuide(md string) ([]guideStep, error) {
	var steps []guideStep
	sc := bufio.NewScanner(strings.NewReader(md))
	var (
		n        int
		inBlock  bool
		lang     string
		start    int
		body     []string
		lastStep = -1 // the step a text block may follow, while only blank lines came after it
	)
	for sc.Scan() {
		n++
		line := sc.Text()
		if !inBlock {
			if info, ok := strings.CutPrefix(line, "```"); ok {
				inBlock, start, body, lang = true, n, nil, strings.TrimSpace(info)
			} else if strings.TrimSpace(line) != "" {
				lastStep = -1
			}
			continue
		}
		if strings.HasPrefix(line, "```") {
			inBlock = false
			switch lang {
			case "sh":
				steps = append(steps, guideStep{line: start, script: strings.Join(body, "\n")})
				lastStep = len(steps) - 1
				continue
			case "text":
				if lastStep < 0 {
					return nil, fmt.Errorf("line %d: a text block that follows no sh block", start)
				}
				for _, b := range body {
					if strings.TrimSpace(b) != "" {
						steps[lastStep].want = append(steps[lastStep].want, b)
					}
				}
			}
			lastStep = -1
			continue
		}
		body = append(body, line)
	}
	if inBlock {
		return nil, fmt.Errorf("line %d: a block that is never closed", start)
	}
	return steps, nil
}

// guideLine turns an expected line into a pattern: `…` is any text, the
// rest literal, the whole line.
func guideLine(want string) *regexp.Regexp {
	parts := strings.Split(want, "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
}

// checkGuideOutput says which expected line is not in out, in order.
func checkGuideOutput(out string, want []string) error {
	lines := strings.Split(out, "\n")
	i := 0
	for _, w := range want {
		re := guideLine(w)
		for i < len(lines) && !re.MatchString(lines[i]) {
			i++
		}
		if i == len(lines) {
			return fmt.Errorf("no line %q (in order) in the output", w)
		}
		i++
	}
	return nil
}

func TestGuideParse(t *testing.T) {
	md := "# x\n```sh\necho a\n```\n\n```text\na\n```\n```console\n$ make run\n```\n```sh\necho b\n```\ntext\n```text\nb\n```\n"
	_, err := parseGuide(md)
	if err == nil || !strings.Contains(err.Error(), "follows no sh block") {
		t.Fatalf("a text block after prose: %v", err)
	}
	steps, err := parseGuide(strings.Replace(md, "text\n```text\nb\n```\n", "", 1))
	if err != nil || len(steps) != 2 || steps[0].script != "echo a" || len(steps[0].want) != 1 || steps[1].want != nil {
		t.Fatalf("steps %+v, %v", steps, err)
	}
	for _, c := range []struct {
		out  string
		want []string
		ok   bool
	}{
		{"x\n{\"a\":1}\ny", []string{`{"a":1}`, "y"}, true},
		{"y\n{\"a\":1}", []string{`{"a":1}`, "y"}, false}, // out of order
		{"id 0193-abc done", []string{"id … done"}, true},
		{"id 0193-abc done!", []string{"id … done"}, false}, // whole lines
		{"a.c", []string{"abc"}, false},
	} {
		if err := checkGuideOutput(c.out, c.want); (err == nil) != c.ok {
			t.Errorf("checkGuideOutput(%q, %q) = %v", c.out, c.want, err)
		}
	}
}

// TestGuide runs docs/guide/README.md: every sh block, in order, in one
// bash (`set -euo pipefail`) against `endcap dev` on a fresh directory and
// free ports, as a newcomer would after `make run`; a block that fails or
// whose output lacks a line of the text block after it fails the test.
func TestGuide(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole local stack as a subprocess")
	}
	testenv.Get(t)
	for _, tool := range []string{"bash", "curl", "jq", "python3", "node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("ENDCAP_TEST_REQUIRE_STACK") != "1" {
				t.Skipf("%s not installed (deploy/local/install.sh installs node and npm): %v", tool, err)
			}
			t.Fatalf("%s not installed: %v", tool, err)
		}
	}
	md, err := os.ReadFile(guidePath)
	if err != nil {
		t.Fatal(err)
	}
	steps, err := parseGuide(string(md))
	if err != nil {
		t.Fatalf("%s: %v", guidePath, err)
	}
	if len(steps) < 8 {
		t.Fatalf("%s: %d sh blocks", guidePath, len(steps))
	}

	d := newDevStack(t, "--demo-traffic=true") // as make run: the guide works beside the demo traffic
	d.start()
	work := t.TempDir()
	// One script: each block, then a marker line on stdout that splits the
	// output by block.
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	for i, s := range steps {
		fmt.Fprintf(&script, "%s\necho '@@guide-block-%d@@'\n", s.script, i)
	}
	hookPort := freePorts(t, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = work
	cmd.Env = append(devEnv(),
		fmt.Sprintf("API=http://127.0.0.1:%d", d.http),
		"CREDS="+filepath.Join(d.dir, "dev", "credentials.json"),
		"HOOK_PORT="+strconv.Itoa(hookPort),
		"TZ=UTC")
	// Its own process group, so that what it started in the background (the
	// webhook receiver) is stopped with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	runErr := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	t.Logf("the guide's %d blocks ran in %s", len(steps), time.Since(start).Round(time.Millisecond))

	outs := strings.Split(stdout.String(), "\n")
	var block []string
	i := 0
	for _, line := range outs {
		if line == fmt.Sprintf("@@guide-block-%d@@", i) {
			if err := checkGuideOutput(strings.Join(block, "\n"), steps[i].want); err != nil {
				t.Errorf("%s, block at line %d: %v\n--- block\n%s\n--- output\n%s", guidePath, steps[i].line, err, steps[i].script, strings.Join(block, "\n"))
			}
			block = nil
			i++
			continue
		}
		block = append(block, line)
	}
	if runErr != nil || i < len(steps) {
		at := "?"
		if i < len(steps) {
			at = fmt.Sprintf("%d\n--- block\n%s", steps[i].line, steps[i].script)
		}
		t.Fatalf("%s: the block at line %s\nfailed: %v\n--- its output\n%s\n--- stderr\n%s", guidePath, at, runErr, strings.Join(block, "\n"), stderr.String())
	}
}
