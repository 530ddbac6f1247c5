package localstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// childSpec describes one child process to start.
type childSpec struct {
	name  string
	path  string
	args  []string
	env   []string // full environment
	dir   string   // working directory
	addr  string   // what the child serves, for messages
	ready func(ctx context.Context) error
	// newReady, when set, makes a fresh ready check for each start of the child (one that keeps state
	// between its calls).
	newReady func() func(ctx context.Context) error
	// extraLogs are further log files (besides logs/<name>.log) whose tail goes into startup errors.
	extraLogs []string
}

// child is a running child process.
type child struct {
	childSpec
	cmd     *exec.Cmd
	pid     int
	cmdline string
	pidFile string
	logPath string
	logFile *os.File
	started time.Time
	done    chan struct{} // closed once Wait has returned
	waitErr error         // valid once done is closed
}

var errCancelledBySibling = errors.New("startup cancelled")

// forker starts processes from one OS thread that stays alive, and locked to its goroutine, until the
// stack stops. PR_SET_PDEATHSIG fires when the *thread* that forked a child exits, not the process, and
// the Go runtime ends a thread when a goroutine locked to it exits; forking from a thread nobody else can
// use makes the children die with this process and only with it.
type forker struct {
	reqs chan forkReq
	quit chan struct{}
}

type forkReq struct {
	cmd *exec.Cmd
	res chan error
}

func newForker() *forker {
	f := &forker{reqs: make(chan forkReq), quit: make(chan struct{})}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine, after Stop
		for {
			select {
			case r := <-f.reqs:
				r.res <- r.cmd.Start()
			case <-f.quit:
				return
			}
		}
	}()
	return f
}

func (f *forker) start(cmd *exec.Cmd) error {
	res := make(chan error, 1)
	f.reqs <- forkReq{cmd: cmd, res: res}
	return <-res
}

func (f *forker) close() { close(f.quit) }

func startChild(f *forker, sp childSpec, o Options) (*child, error) {
	c := &child{
		childSpec: sp,
		pidFile:   o.pidFile(sp.name),
		logPath:   o.logFile(sp.name),
		done:      make(chan struct{}),
	}
	if sp.newReady != nil {
		c.ready = sp.newReady()
	}
	c.cmdline = shellQuote(append([]string{sp.path}, sp.args...))
	lf, err := os.OpenFile(c.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("localstack: %s: %w", sp.name, err)
	}
	c.logFile = lf
	fmt.Fprintf(lf, "\n==== localstack %s: starting %s\n", time.Now().Format(time.RFC3339), c.cmdline)

	cmd := exec.Command(sp.path, sp.args...)
	cmd.Dir = sp.dir
	cmd.Env = sp.env
	cmd.Stdin = nil
	cmd.Stdout = lf // an *os.File goes to the child as is: no copying goroutine, output survives us
	cmd.Stderr = lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	c.cmd = cmd
	c.started = time.Now()
	if err := f.start(cmd); err != nil {
		lf.Close()
		return nil, fmt.Errorf("localstack: starting %s (%s): %w", sp.name, c.cmdline, err)
	}
	c.pid = cmd.Process.Pid
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	if err := os.WriteFile(c.pidFile, []byte(strconv.Itoa(c.pid)+"\n"), 0o644); err != nil {
		_ = c.stop(slog.New(slog.DiscardHandler))
		return nil, fmt.Errorf("localstack: %s: writing pid file: %w", sp.name, err)
	}
	return c, nil
}

// waitReady polls the child's readiness check until it succeeds, the child exits, or ctx ends.
func (c *child) waitReady(ctx context.Context) error {
	var last error
	for {
		select {
		case <-c.done:
			return fmt.Errorf("localstack: %s exited during startup (%v)\ncommand: %s\n%s",
				c.name, c.waitErr, c.cmdline, c.logTails())
		default:
		}
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := c.ready(attempt)
		cancel()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				return fmt.Errorf("localstack: %s: %w", c.name, errCancelledBySibling)
			}
			return fmt.Errorf("localstack: %s (pid %d, %s) not ready after %s: %v\ncommand: %s\n%s",
				c.name, c.pid, c.addr, time.Since(c.started).Round(time.Millisecond), last, c.cmdline, c.logTails())
		case <-c.done:
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// lockDir takes an exclusive flock on Dir/run/localstack.lock and records our PID in it. The file is
// opened close-on-exec, so children do not inherit the lock.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, "run", "localstack.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("localstack: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner, _ := io.ReadAll(io.LimitReader(f, 64))
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("localstack: %s is in use by another running stack (process %s); stop it or use another Options.Dir",
				dir, strings.TrimSpace(string(owner)))
		}
		return nil, fmt.Errorf("localstack: locking %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// stop terminates the child: SIGTERM, up to stopGrace, then SIGKILL to the process and its group.
func (c *child) stop(log *slog.Logger) error {
	defer func() {
		_ = os.Remove(c.pidFile)
		if c.logFile != nil {
			c.logFile.Close()
		}
	}()
	select {
	case <-c.done:
		return fmt.Errorf("localstack: %s (pid %d) had already exited: %v\n%s", c.name, c.pid, c.waitErr, c.logTails())
	default:
	}
	t0 := time.Now()
	_ = syscall.Kill(c.pid, syscall.SIGTERM)
	select {
	case <-c.done:
		log.Debug("localstack: stopped", "service", c.name, "pid", c.pid, "took", time.Since(t0).Round(time.Millisecond))
		return nil
	case <-time.After(stopGrace):
	}
	log.Warn("localstack: child did not stop after SIGTERM; sending SIGKILL", "service", c.name, "pid", c.pid, "grace", stopGrace)
	_ = syscall.Kill(-c.pid, syscall.SIGKILL) // its process group (Setpgid: pgid == pid)
	_ = syscall.Kill(c.pid, syscall.SIGKILL)
	select {
	case <-c.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("localstack: %s (pid %d) did not exit after SIGKILL", c.name, c.pid)
	}
}

// logTails returns the last lines of the child's log files.
func (c *child) logTails() string {
	var b strings.Builder
	for _, p := range append([]string{c.logPath}, c.extraLogs...) {
		t := tailFile(p, 25, 8<<10)
		if t == "" {
			continue
		}
		fmt.Fprintf(&b, "--- tail of %s ---\n%s", p, t)
		if !strings.HasSuffix(t, "\n") {
			b.WriteByte('\n')
		}
	}
	if b.Len() == 0 {
		return "(log files empty)"
	}
	return b.String()
}

// tailFile returns at most the last n lines within the last max bytes of a file ("" if unreadable).
func tailFile(path string, n int, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := st.Size() - max
	if off < 0 {
		off = 0
	}
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
		return ""
	}
	if off > 0 { // drop the partial first line
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			buf = buf[i+1:]
		}
	}
	lines := strings.SplitAfter(string(buf), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

// stopStale stops the process named in pidFile if it is still alive and its command line references dir,
// i.e. it is a child of an earlier run on the same data directory. Anything else is left alone.
func stopStale(service, pidFile, dir string, log *slog.Logger) error {
	b, err := os.ReadFile(pidFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("localstack: %w", err)
	}
	defer os.Remove(pidFile)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 || pid == os.Getpid() {
		return nil
	}
	if !processAlive(pid) {
		return nil
	}
	cmdline, gone := readCmdline(pid, stopGrace+5*time.Second)
	if gone {
		return nil
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if !referencesDir(args, dir) {
		log.Info("localstack: pid file names a process that is not ours; ignoring it",
			"service", service, "pid", pid, "cmdline", strings.Join(args, " "))
		return nil
	}
	log.Warn("localstack: stopping stale child of an earlier run", "service", service, "pid", pid, "cmdline", strings.Join(args, " "))
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if waitGone(pid, stopGrace) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if waitGone(pid, 5*time.Second) {
		return nil
	}
	return fmt.Errorf("localstack: stale %s process %d (%s) does not exit; stop it and retry", service, pid, strings.Join(args, " "))
}

// referencesDir reports whether an argument is dir or a path below it (possibly as "--flag=path").
func referencesDir(args []string, dir string) bool {
	dir = filepath.Clean(dir)
	for _, a := range args {
		if a == dir || strings.HasSuffix(a, "="+dir) || strings.Contains(a, dir+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Format: pid (comm) state ...; comm may contain spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return true
	}
	return stat[i+2] != 'Z' && stat[i+2] != 'X'
}

// ProcessCPU returns the CPU time (user and system) process pid has used so
// far, from /proc/<pid>/stat. Linux reports it in clock ticks of USER_HZ,
// which is 100 on every architecture Go supports. ok is false when pid is
// gone or the file is not in the expected format.
func ProcessCPU(pid int) (cpu time.Duration, ok bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// After "pid (comm) ": state is field 3; utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const userHZ = 100
	return time.Duration(utime+stime) * time.Second / userHZ, true
}

// readCmdline reads pid's command line. An empty one is read again until it
// is not, or the process is gone, for at most d: a process that is exiting
// has already released its memory, command line included (typically our
// child killed with its parent a moment ago, kill -9 of `endcap dev`, still
// holding its ports), and a live process's has been seen read empty once,
// under load (TestStaleChildIsStoppedAndStrangerIsNot). Still empty after d,
// it is returned empty.
func readCmdline(pid int, d time.Duration) (cmdline []byte, gone bool) {
	deadline := time.Now().Add(d)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !processAlive(pid) {
			return nil, true
		}
		if len(b) > 0 || !time.Now().Before(deadline) {
			return b, false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !processAlive(pid) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return !processAlive(pid)
}

// childEnv returns the environment minus variables whose name starts with one of the prefixes, plus extra.
func childEnv(dropPrefixes []string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, p := range dropPrefixes {
			if strings.HasPrefix(name, p) {
				drop = true
				break
			}
		}
		if !drop {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// shellQuote renders argv for messages and logs.
func shellQuote(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`!*?[]{}()<>|&;#~") {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
