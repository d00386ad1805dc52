package cluster

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestParentDeathStopsChildren: when the process that started the cluster
// is killed with SIGKILL (no chance to stop anything), every child is sent
// SIGTERM by the kernel and exits; none keeps serving as an orphan.
func TestParentDeathStopsChildren(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	parent := exec.Command(bin, "-test.run=^$")
	parent.Env = append(os.Environ(), fakeParentEnv+"=1")
	parent.Stderr = os.Stderr
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "ready" {
		pid, err := strconv.Atoi(sc.Text())
		if err != nil {
			t.Fatalf("parent printed %q", sc.Text())
		}
		pids = append(pids, pid)
	}
	if len(pids) != 3 {
		_ = parent.Process.Kill()
		t.Fatalf("parent reported %d children, want 3", len(pids))
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil {
			// A child that exited is a zombie until init reaps it;
			// /proc shows its state.
			if st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && zombie(st) {
				break
			}
			if time.Now().After(deadline) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("child %d still running 30 s after its parent was killed", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// zombie reports whether a /proc/PID/stat line shows state Z.
func zombie(stat []byte) bool {
	for i := len(stat) - 1; i >= 0; i-- {
		if stat[i] == ')' {
			return i+2 < len(stat) && stat[i+2] == 'Z'
		}
	}
	return false
}
