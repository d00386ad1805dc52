//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUpSupervises runs `tandem up` as a user would and checks that it
// looks after its cluster: the token it made is kept in a file only the
// user can read, where `tandem inspect` finds it with no flag; a decode
// worker and then the router, each killed with SIGKILL, are started again
// and requests succeed again; and `tandem up` itself killed with SIGKILL
// leaves no process behind.
func TestUpSupervises(t *testing.T) {
	setup(t)
	port := freePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	runDir := t.TempDir()
	cmd := exec.Command(binPath, "up", "--model", modelPath, "--port", strconv.Itoa(port))
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "TANDEM_CLUSTER_TOKEN=") && !strings.HasPrefix(e, "XDG_RUNTIME_DIR=") {
			env = append(env, e)
		}
	}
	cmd.Env = append(env, "XDG_RUNTIME_DIR="+runDir)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	upDone := make(chan struct{})
	go func() { _ = cmd.Wait(); close(upDone) }()
	var children []int // every worker and router pid seen, for the final check
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-upDone
		for _, pid := range children {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if t.Failed() {
			t.Logf("tandem up output:\n%s", stderr.String())
		}
	})

	// The two lines up prints once the cluster is healthy.
	lines := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var tokenPath string
	for tokenPath == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("tandem up ended its output before printing the token file")
			}
			if rest, ok := strings.CutPrefix(l, "cluster token: "); ok {
				tokenPath, _, _ = strings.Cut(rest, " ")
			}
		case <-time.After(healthTimeout):
			t.Fatal("tandem up did not print its token file within the health timeout")
		}
	}
	if filepath.Dir(filepath.Dir(filepath.Dir(tokenPath))) != runDir {
		t.Errorf("token file %s is not under $XDG_RUNTIME_DIR %s", tokenPath, runDir)
	}
	if st, err := os.Stat(tokenPath); err != nil {
		t.Fatal(err)
	} else if st.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", st.Mode().Perm())
	}

	// inspect with no token in the environment and no flag.
	insp := exec.Command(binPath, "inspect", base)
	insp.Env = cmd.Env
	if out, err := insp.CombinedOutput(); err != nil {
		t.Fatalf("tandem inspect %s with no token given: %v\n%s", base, err, out)
	}

	ok := func() bool {
		c := &http.Client{Timeout: 20 * time.Second}
		resp, err := c.Post(base+"/v1/completions", "application/json",
			strings.NewReader(`{"prompt":"Once upon a time","max_tokens":4,"temperature":0}`))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode == http.StatusOK
	}
	if !ok() {
		t.Fatal("a completion through tandem up failed before any kill")
	}
	for _, role := range []string{"decode", "route"} {
		pid := childPID(t, cmd.Process.Pid, role)
		children = append(children, pid)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		waitFor(t, "a completion to succeed after "+role+" was killed", ok)
		again := childPID(t, cmd.Process.Pid, role)
		if again == pid {
			t.Fatalf("%s pid %d unchanged after SIGKILL", role, pid)
		}
		children = append(children, again)
		t.Logf("%s killed: serving again after %v", role, time.Since(start).Round(time.Millisecond))
	}
	for _, role := range []string{"prefill"} {
		children = append(children, childPID(t, cmd.Process.Pid, role))
	}

	// SIGKILL up itself: the kernel sends its children SIGTERM; they
	// drain (nothing is running) and exit.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-upDone
	deadline := time.Now().Add(45 * time.Second)
	for _, pid := range children {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still running 45 s after tandem up was killed", pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// childPID returns the pid of the child of parent whose command line runs
// the tandem subcommand role, waiting for it to appear.
func childPID(t *testing.T, parent int, role string) int {
	t.Helper()
	var pid int
	waitFor(t, "a "+role+" child of tandem up", func() bool {
		// A child is listed under the thread of up that forked it.
		var kids []byte
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", parent))
		for _, f := range tasks {
			b, _ := os.ReadFile(f)
			kids = append(append(kids, ' '), b...)
		}
		for _, f := range strings.Fields(string(kids)) {
			p, _ := strconv.Atoi(f)
			argv, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
			if err != nil {
				continue
			}
			args := bytes.Split(argv, []byte{0})
			if len(args) > 1 && string(args[1]) == role && alive(p) {
				pid = p
				return true
			}
		}
		return false
	})
	return pid
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(st, ')')
	return i < 0 || i+2 >= len(st) || st[i+2] != 'Z'
}
