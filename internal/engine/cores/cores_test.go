package cores_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tandem/internal/engine/cores"
	"tandem/internal/engine/kernels"
)

func TestShare(t *testing.T) {
	const (
		I = cores.Idle
		N = cores.Normal
		U = cores.Urgent
	)
	no, yes := false, true
	for _, c := range []struct {
		name     string
		self     int
		prios    []cores.Priority
		starving []bool
		live     []bool
		holds    []int
		cores    int
		want     int
	}{
		{"alone", 0, []cores.Priority{N, I}, []bool{no, no}, []bool{yes, yes}, []int{0, 0}, 2, 2},
		{"equal split", 0, []cores.Priority{N, N}, []bool{no, no}, []bool{yes, yes}, []int{0, 0}, 2, 1},
		{"equal split, other slot", 1, []cores.Priority{N, N}, []bool{no, no}, []bool{yes, yes}, []int{1, 0}, 2, 1},
		{"urgent takes all", 1, []cores.Priority{N, U}, []bool{no, no}, []bool{yes, yes}, []int{2, 0}, 2, 2},
		{"lower priority gets none", 0, []cores.Priority{N, U}, []bool{no, no}, []bool{yes, yes}, []int{0, 2}, 2, 0},
		{"starving lower priority gets one", 0, []cores.Priority{N, U}, []bool{yes, no}, []bool{yes, yes}, []int{0, 2}, 2, 1},
		{"urgent leaves one to the starving", 1, []cores.Priority{N, U}, []bool{yes, no}, []bool{yes, yes}, []int{0, 2}, 2, 1},
		{"dead urgent counts for nothing", 0, []cores.Priority{N, U}, []bool{no, no}, []bool{yes, no}, []int{0, 2}, 2, 2},
		{"idle holder counts as normal", 0, []cores.Priority{N, I}, []bool{no, no}, []bool{yes, yes}, []int{0, 1}, 2, 2}, // ShareOf skips the Lease's Idle->Normal mapping
		{"three on two: remainder to the lowest slot", 0, []cores.Priority{N, N, N}, []bool{no, no, no}, []bool{yes, yes, yes}, []int{0, 0, 0}, 2, 1},
		{"three on two: at least one each", 2, []cores.Priority{N, N, N}, []bool{no, no, no}, []bool{yes, yes, yes}, []int{0, 0, 0}, 2, 1},
		{"four cores, two peers", 1, []cores.Priority{U, U}, []bool{no, no}, []bool{yes, yes}, []int{0, 0}, 4, 2},
		{"three cores, two peers: remainder to slot 0", 0, []cores.Priority{N, N}, []bool{no, no}, []bool{yes, yes}, []int{0, 0}, 3, 2},
		{"three cores, two peers: slot 1", 1, []cores.Priority{N, N}, []bool{no, no}, []bool{yes, yes}, []int{0, 0}, 3, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := cores.ShareOf(c.self, c.prios, c.starving, c.live, c.holds, c.cores); got != c.want {
				t.Errorf("share = %d, want %d", got, c.want)
			}
		})
	}
}

func newRegion(t *testing.T, n, slots int) *cores.Region {
	t.Helper()
	r, err := cores.Create(n, slots)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func newLease(t *testing.T, r *cores.Region, slot int, o cores.Options) *cores.Lease {
	t.Helper()
	l, err := r.Lease(slot, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func TestOpenRejectsOtherFiles(t *testing.T) {
	for _, spec := range []string{"fd:x", "fd:-1", "/nonexistent/lease", "/dev/null"} {
		if _, err := cores.Open(spec); err == nil {
			t.Errorf("Open(%q) succeeded", spec)
		}
	}
	if _, err := cores.Create(0, 2); err == nil {
		t.Error("Create(0 cores) succeeded")
	}
	if _, err := cores.Create(2, cores.MaxSlots+1); err == nil {
		t.Error("Create(too many slots) succeeded")
	}
}

// TestOpenByPath: a second mapping of the region (what a worker gets from
// fd:3) sees the first one's state.
func TestOpenByPath(t *testing.T) {
	r := newRegion(t, 2, 2)
	r2, err := cores.Open("/proc/self/fd/" + itoa(int(r.File().Fd())))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if r2.Cores() != 2 || r2.Slots() != 2 {
		t.Fatalf("reopened region: %d cores, %d slots, want 2, 2", r2.Cores(), r2.Slots())
	}
	l := newLease(t, r, 0, cores.Options{})
	l.Acquire()
	if r2.Held(0) != 1 {
		t.Errorf("the other mapping sees %d cores held by slot 0, want 1", r2.Held(0))
	}
	l.Release()
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// TestPoolsNeverExceedCores runs two pools of two threads each, as two
// workers' pools sharing a two-core lease, side by side with changing
// priorities, and checks that no more chunks ever run at once than there
// are cores, and that every round still computes all of its range.
var sink atomic.Uint64

func TestPoolsNeverExceedCores(t *testing.T) {
	const ncores = 2
	r := newRegion(t, ncores, 2)
	o := cores.Options{MaxPark: time.Hour, MaxWait: time.Hour} // never overcommit
	var running, peak atomic.Int32
	var wg sync.WaitGroup
	for slot := range 2 {
		l := newLease(t, r, slot, o)
		p := kernels.NewPool(ncores)
		defer p.Close()
		p.SetCoreLease(l)
		wg.Go(func() {
			sums := make([]int, 64)
			for i := range 400 {
				prio := cores.Normal
				if slot == 1 && i%3 == 0 {
					prio = cores.Urgent
				}
				end := l.Step(prio)
				p.Parallel(len(sums), func(lo, hi int) {
					n := running.Add(1)
					for {
						m := peak.Load()
						if n <= m || peak.CompareAndSwap(m, n) {
							break
						}
					}
					for j := lo; j < hi; j++ {
						sums[j]++
					}
					x := uint64(lo)
					for k := range 20000 { // a little work, so chunks overlap
						x = x*6364136223846793005 + uint64(k)
					}
					sink.Add(x)
					running.Add(-1)
				})
				end()
			}
			for j, s := range sums {
				if s != 400 {
					t.Errorf("slot %d: element %d computed %d times, want 400", slot, j, s)
					return
				}
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > ncores {
		t.Errorf("%d chunks ran at once on a %d-core lease", p, ncores)
	}
	if r.Held(0) != 0 || r.Held(1) != 0 {
		t.Errorf("cores still held after the rounds: %d, %d", r.Held(0), r.Held(1))
	}
}

// TestLenderParksAndResumes: a normal-priority round waits while an
// urgent process holds every core, and runs once it gives them back.
func TestLenderParksAndResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegion(t, 2, 2)
		lender := newLease(t, r, 0, cores.Options{})
		borrower := newLease(t, r, 1, cores.Options{})
		end := borrower.Step(cores.Urgent)
		borrower.Acquire()
		if !borrower.TryAcquire() {
			t.Fatal("an urgent process alone could not take the second core")
		}
		var got atomic.Bool
		go func() {
			lender.Acquire()
			got.Store(true)
		}()
		time.Sleep(10 * time.Millisecond) // fake time: well under MaxPark
		synctest.Wait()
		if got.Load() {
			t.Fatal("the lender ran a round while the urgent borrower held every core")
		}
		if borrower.Revoked() {
			t.Fatal("the borrower's cores were revoked before the lender starved")
		}
		borrower.Release()
		borrower.Release()
		end()
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if !got.Load() {
			t.Fatal("the lender did not resume after the borrower released its cores")
		}
		s := lender.Stats()
		if s.Parks != 1 || s.Lent < 10*time.Millisecond || s.Forced != 0 {
			t.Errorf("lender stats %+v: want 1 park of >= 10ms, none forced", s)
		}
		lender.Release()
	})
}

// TestStarvingLenderGetsACore: past MaxPark the lender marks itself
// starving, and the borrower's second core is revoked for it.
func TestStarvingLenderGetsACore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegion(t, 2, 2)
		o := cores.Options{MaxPark: 50 * time.Millisecond, MaxWait: time.Hour}
		lender := newLease(t, r, 0, o)
		borrower := newLease(t, r, 1, o)
		defer borrower.Step(cores.Urgent)()
		borrower.Acquire()
		borrower.TryAcquire()
		var got atomic.Bool
		go func() {
			lender.Acquire()
			got.Store(true)
		}()
		time.Sleep(60 * time.Millisecond)
		synctest.Wait()
		if !borrower.Revoked() {
			t.Fatal("the borrower keeps both cores while the lender starves")
		}
		borrower.Release() // what a helper does when Revoked
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if !got.Load() {
			t.Fatal("the starving lender did not get the revoked core")
		}
		if borrower.TryAcquire() {
			t.Error("the borrower took the core back from the lender")
		}
		lender.Release()
		borrower.Release()
	})
}

// TestDeadBorrowerCannotPinLender: a process killed while holding every
// core (its heartbeat stops, its cores stay in the region) is taken for
// dead after the TTL, and its cores go back to the lender.
func TestDeadBorrowerCannotPinLender(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegion(t, 2, 2)
		o := cores.Options{TTL: 500 * time.Millisecond, MaxPark: time.Hour, MaxWait: time.Hour}
		lender := newLease(t, r, 0, o)
		dead, err := r.Lease(1, o)
		if err != nil {
			t.Fatal(err)
		}
		dead.Step(cores.Urgent)
		dead.Acquire()
		dead.TryAcquire()
		dead.Abandon()
		var got atomic.Bool
		go func() {
			lender.Acquire()
			got.Store(true)
		}()
		time.Sleep(400 * time.Millisecond)
		synctest.Wait()
		if got.Load() {
			t.Fatal("the lender took a core from a borrower still within its TTL")
		}
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		if !got.Load() {
			t.Fatal("the lender is still parked behind a dead borrower past its TTL")
		}
		if s := lender.Stats(); s.Reclaimed != 2 || s.Forced != 0 {
			t.Errorf("lender stats %+v: want 2 cores reclaimed, none forced", s)
		}
		if !lender.TryAcquire() {
			t.Error("the dead borrower's second core was not freed")
		}
		lender.Release()
		lender.Release()
	})
}

// TestMaxWaitBoundsAcquire: a live process that never gives a core back
// (stuck) holds a round up for MaxWait at most; the round then runs
// without one and is counted as forced.
func TestMaxWaitBoundsAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegion(t, 1, 2)
		o := cores.Options{MaxPark: 10 * time.Millisecond, MaxWait: 200 * time.Millisecond}
		lender := newLease(t, r, 0, o)
		stuck := newLease(t, r, 1, o)
		defer stuck.Step(cores.Urgent)()
		stuck.Acquire()
		var got atomic.Bool
		go func() {
			lender.Acquire()
			got.Store(true)
		}()
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if got.Load() {
			t.Fatal("forced before MaxWait")
		}
		time.Sleep(150 * time.Millisecond)
		synctest.Wait()
		if !got.Load() {
			t.Fatal("Acquire still waits past MaxWait")
		}
		if s := lender.Stats(); s.Forced != 1 {
			t.Errorf("Forced = %d, want 1", s.Forced)
		}
		lender.Release()
		if r.Held(1) != 1 || r.Held(0) != 0 {
			t.Errorf("held %d, %d after the forced round's release, want 0, 1", r.Held(0), r.Held(1))
		}
		stuck.Release()
	})
}

// TestRestartedWorkerDropsOldCores: a new lease of a slot (the worker
// started again after a kill) does not inherit the cores its slot held.
func TestRestartedWorkerDropsOldCores(t *testing.T) {
	r := newRegion(t, 2, 2)
	old, err := r.Lease(1, cores.Options{})
	if err != nil {
		t.Fatal(err)
	}
	old.Acquire()
	old.Abandon()
	newLease(t, r, 1, cores.Options{})
	if r.Held(1) != 0 {
		t.Errorf("the restarted slot holds %d cores, want 0", r.Held(1))
	}
}

func TestBorrowedAccounting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegion(t, 2, 2)
		l := newLease(t, r, 0, cores.Options{})
		l.Acquire()
		l.TryAcquire() // the other slot is idle: both cores
		time.Sleep(time.Second)
		l.Release()
		l.Release()
		if s := l.Stats(); s.Borrowed != time.Second || s.Held != 0 {
			t.Errorf("stats %+v: want 1 s borrowed (one core beyond the share of 1 for 1 s), 0 held", s)
		}
	})
}

func TestDebugHandlerAndCollector(t *testing.T) {
	r := newRegion(t, 2, 2)
	l := newLease(t, r, 1, cores.Options{})
	end := l.Step(cores.Urgent)
	l.Acquire()
	rec := httptest.NewRecorder()
	cores.DebugHandler(l).ServeHTTP(rec, httptest.NewRequest("GET", "/debug/cores", nil))
	var got struct {
		Slot, Cores int
		Slots       []cores.SlotInfo
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("debug JSON: %v: %s", err, rec.Body)
	}
	if got.Slot != 1 || got.Cores != 2 || len(got.Slots) != 2 || got.Slots[1].Priority != "urgent" || got.Slots[1].Held != 1 || !got.Slots[1].Live || got.Slots[0].Live {
		t.Errorf("debug state %+v: want slot 1 of 2 live, urgent, holding 1; slot 0 not live", got)
	}
	l.Release()
	end()
	reg := prometheus.NewRegistry()
	reg.MustRegister(cores.NewCollector(l))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, want := range []string{"tandem_core_lease_borrowed_seconds_total", "tandem_core_lease_lent_seconds_total", "tandem_core_lease_cores_held"} {
		if !names[want] {
			t.Errorf("no %s among %v", want, names)
		}
	}
}

// childEnv makes the test binary act as a borrower process (see
// TestMain): it maps the region from fd 3, takes every core at urgent
// priority, says so on stdout and waits to be killed.
const childEnv = "TANDEM_CORES_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		r, err := cores.Open("fd:3")
		if err != nil {
			fmt.Println("child:", err)
			os.Exit(2)
		}
		l, err := r.Lease(1, cores.Options{TTL: 200 * time.Millisecond})
		if err != nil {
			fmt.Println("child:", err)
			os.Exit(2)
		}
		l.Step(cores.Urgent)
		l.Acquire()
		for l.TryAcquire() {
		}
		fmt.Println("holding")
		select {}
	}
	os.Exit(m.Run())
}

// TestKilledBorrowerProcess: a real process that holds every core of the
// region is SIGKILLed; the lender's round, parked behind it, runs once
// the dead process's heartbeat is older than the TTL, and its cores are
// reclaimed.
func TestKilledBorrowerProcess(t *testing.T) {
	r := newRegion(t, 2, 2)
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.ExtraFiles = []*os.File{r.File()}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "holding\n" {
		t.Fatalf("child said %q (%v), want holding", line, err)
	}
	if r.Held(1) != 2 {
		t.Fatalf("the child holds %d cores, want 2", r.Held(1))
	}
	lender := newLease(t, r, 0, cores.Options{TTL: 200 * time.Millisecond, MaxPark: time.Hour, MaxWait: time.Hour})
	if lender.TryAcquire() {
		t.Fatal("the lender took a core from a live urgent holder")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	lender.Acquire() // returns only once the child's cores are reclaimed (MaxWait is an hour)
	if s := lender.Stats(); s.Reclaimed != 2 || s.Forced != 0 {
		t.Errorf("lender stats %+v: want 2 cores reclaimed, none forced", s)
	}
	lender.Release()
}

// TestOthersWant: a lease sees another live slot's step, its held cores and
// its end, and a closed (gone) slot wants nothing.
func TestOthersWant(t *testing.T) {
	r := newRegion(t, 2, 2)
	d := newLease(t, r, 1, cores.Options{})
	p, err := r.Lease(0, cores.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d.OthersWant() {
		t.Error("the other slot is idle, yet OthersWant")
	}
	end := p.Step(cores.Normal)
	if !d.OthersWant() {
		t.Error("the other slot is in a step, yet not OthersWant")
	}
	end()
	p.Acquire() // holding a core outside a step counts too
	if !d.OthersWant() {
		t.Error("the other slot holds a core, yet not OthersWant")
	}
	p.Release()
	if d.OthersWant() {
		t.Error("the other slot went idle, yet OthersWant")
	}
	if p.OthersWant() {
		t.Error("slot 0 sees slot 1 idle, yet OthersWant")
	}
	p.Step(cores.Normal)
	p.Close()
	if d.OthersWant() {
		t.Error("the other slot closed mid-step, yet OthersWant")
	}
}

// TestCallerYieldsMidRound: a pool's caller running a round alone on the
// only core gives it back between chunks when another process's urgent
// step asks for it, makes no progress while that process holds it, and
// finishes the round after it is given back.
func TestCallerYieldsMidRound(t *testing.T) {
	r := newRegion(t, 1, 2)
	a := newLease(t, r, 0, cores.Options{})
	b := newLease(t, r, 1, cores.Options{})
	pa := kernels.NewPool(1)
	defer pa.Close()
	pa.SetCoreLease(a)

	const n = 64
	var done atomic.Int32
	urgent := make(chan struct{})
	got := make(chan int32)
	go func() {
		end := b.Step(cores.Urgent)
		close(urgent)
		b.Acquire() // a's caller must give the only core back mid-round
		at := done.Load()
		for range 10000 {
			runtime.Gosched()
		}
		if now := done.Load(); now != at {
			t.Errorf("a ran %d chunks while b held the only core", now-at)
		}
		b.Release()
		end()
		got <- at
	}()
	pa.Parallel(n, func(lo, hi int) {
		if lo == 0 {
			<-urgent
		}
		done.Add(int32(hi - lo))
	})
	at := <-got
	if at >= n {
		t.Errorf("b got the core after a's round ended (%d of %d done), want mid-round", at, n)
	}
	if done.Load() != n {
		t.Errorf("a's round did %d of %d elements", done.Load(), n)
	}
}
