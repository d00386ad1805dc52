package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"tandem/internal/cluster"
)

// Limits of the harness.
const (
	buildTimeout  = 10 * time.Minute       // go build of the whole binary on a slow machine
	healthTimeout = 2 * time.Minute        // from process start to GET /ready == 200
	stopTimeout   = 15 * time.Second       // from SIGINT to exit, before SIGKILL
	hurryInterval = 100 * time.Millisecond // SIGINT is repeated: a second one ends the drain's settle window
)

var (
	setupOnce sync.Once
	setupErr  error
	workDir   string // holds the binary and the model; removed by TestMain
	binPath   string
	modelPath string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if workDir != "" {
		os.RemoveAll(workDir)
	}
	os.Exit(code)
}

// repoRoot returns the repository root: the folder above this file's.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("runtime.Caller failed: cannot locate the repository root")
	}
	return filepath.Dir(filepath.Dir(file))
}

// skipShort skips the test in -short mode.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: skipped in -short")
	}
}

// setup skips in -short mode, and otherwise builds the binary and
// synthesizes the model once for the whole package.
func setup(t *testing.T) {
	t.Helper()
	skipShort(t)
	root := repoRoot(t)
	setupOnce.Do(func() { setupErr = buildAll(root) })
	if setupErr != nil {
		t.Fatal(setupErr)
	}
}

func buildAll(root string) error {
	dir, err := os.MkdirTemp("", "tandem-e2e-")
	if err != nil {
		return fmt.Errorf("make work folder: %w", err)
	}
	workDir = dir
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("find the go command to build tandem: %w", err)
	}
	binPath = filepath.Join(dir, "tandem")
	if runtime.GOOS == "windows" {
		binPath += ".exe"
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	build := exec.CommandContext(ctx, goTool, "build", "-o", binPath, "./cmd/tandem")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/tandem: %w\n%s", err, out)
	}
	modelPath = filepath.Join(dir, "tiny.gguf")
	synth := exec.CommandContext(ctx, binPath, "model", "synth", "--preset", "tiny", "--type", "q8_0", "-o", modelPath)
	if out, err := synth.CombinedOutput(); err != nil {
		return fmt.Errorf("tandem model synth --preset tiny: %w\n%s", err, out)
	}
	return nil
}

// lockedBuffer collects a child's output from its copying goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	port, err := cluster.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// startServer runs `tandem serve` on the tiny model and returns its base
// URL (http://127.0.0.1:PORT) once GET /ready answers 200. The process is
// stopped when the test ends; its output is logged if the test failed.
func startServer(t *testing.T) string {
	t.Helper()
	if out, err := exec.Command(binPath, "serve", "--help").CombinedOutput(); err != nil {
		t.Fatalf("`tandem serve --help` failed, so the serve command is missing or broken: %v\n%s", err, out)
	}
	port := freePort(t)
	return startProcess(t, port, "serve", "--model", modelPath, "--port", strconv.Itoa(port))
}

// startProcess runs tandem with args, waits until GET /ready on port
// answers 200 and returns the base URL. It stops the process with SIGINT
// (repeated, so that it does not wait out its drain's settle window) when
// the test ends and logs its output if the test failed.
func startProcess(t *testing.T, port int, args ...string) string {
	t.Helper()
	var out lockedBuffer
	return startProcessOut(t, port, &out, &out, args...)
}

// startProcessOut is startProcess with the child's stdout and stderr
// written to the given buffers (they may be the same one).
func startProcessOut(t *testing.T, port int, stdout, stderr *lockedBuffer, args ...string) string {
	t.Helper()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(os.Environ(), "TANDEM_CLUSTER_TOKEN="+e2eClusterToken) // so debugGet's credential is the cluster's
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	out := stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start tandem %s: %v", args[0], err)
	}
	done := make(chan struct{})
	var waitErr error // set before done is closed
	go func() {
		waitErr = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		select {
		case <-done:
			t.Errorf("tandem %s exited before the test ended: %v", args[0], waitErr)
		default:
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				cmd.Process.Kill() // no SIGINT on this system
			}
			hurry := time.NewTicker(hurryInterval)
			defer hurry.Stop()
			deadline := time.After(stopTimeout)
		wait:
			for {
				select {
				case <-done:
					break wait
				case <-hurry.C:
					cmd.Process.Signal(os.Interrupt) // nothing routes to it any more: no settle window
				case <-deadline:
					t.Errorf("tandem %s did not exit within %v of SIGINT; killing it", args[0], stopTimeout)
					cmd.Process.Kill()
					<-done
					break wait
				}
			}
		}
		if t.Failed() {
			t.Logf("tandem %s output:\n%s", args[0], out.String())
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), healthTimeout)
	defer cancel()
	if err := cluster.WaitReady(ctx, &http.Client{Timeout: 2 * time.Second}, base, done); errors.Is(err, cluster.ErrExited) {
		t.Fatalf("tandem %s exited while starting: %v\n%s", args[0], waitErr, out.String())
	} else if err != nil {
		t.Fatalf("tandem %s: %v", args[0], err)
	}
	return base
}

// runTandem runs the binary with args and returns its stdout; a non-zero
// exit fails the test, showing stderr.
func runTandem(t *testing.T, timeout time.Duration, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) || ctx.Err() != nil {
			t.Fatalf("tandem %v: %v (context: %v)\nstdout:\n%s\nstderr:\n%s", args, err, ctx.Err(), stdout.Bytes(), stderr.Bytes())
		}
		t.Fatalf("tandem %v: %v", args, err)
	}
	return stdout.Bytes()
}
