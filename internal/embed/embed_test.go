package embed

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"tandem/internal/engine/model"
)

// fakeRunner returns, per input, the vector (first token id, length, 1)
// and records each batch's input count; with gate set, each batch waits
// for a value on it after announcing itself on started.
type fakeRunner struct {
	mu      sync.Mutex
	batches []int
	gate    chan struct{}
	started chan int
	err     error
}

func (f *fakeRunner) Embed(inputs [][]int32) ([][]float32, error) {
	f.mu.Lock()
	f.batches = append(f.batches, len(inputs))
	f.mu.Unlock()
	if f.gate != nil {
		f.started <- len(inputs)
		<-f.gate
	}
	if f.err != nil {
		return nil, f.err
	}
	out := make([][]float32, len(inputs))
	for i, in := range inputs {
		out[i] = []float32{float32(in[0]), float32(len(in)), 1}
	}
	return out, nil
}

func (f *fakeRunner) sizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.batches)
}

var fakeInfo = Info{Name: "fake", Dim: 3, Context: 100, Vocab: 1000, Pooling: model.PoolMean}

func inputsOf(n, length, first int) [][]int32 {
	out := make([][]int32, n)
	for i := range out {
		out[i] = make([]int32, length)
		out[i][0] = int32(first + i)
	}
	return out
}

// TestBatchBounds: a request larger than a batch spans several, each within
// MaxBatchInputs and MaxBatchTokens, and its vectors come back in order,
// normalized.
func TestBatchBounds(t *testing.T) {
	f := &fakeRunner{}
	s := New(f, fakeInfo, Config{MaxBatchInputs: 32, MaxBatchTokens: 1000})
	defer s.Close()
	vecs, err := s.Embed(context.Background(), inputsOf(70, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.sizes(); !slices.Equal(got, []int{32, 32, 6}) {
		t.Errorf("batches %v, want [32 32 6]", got)
	}
	for i, v := range vecs {
		n := math.Sqrt(float64(v[0]*v[0] + v[1]*v[1] + v[2]*v[2]))
		if math.Abs(n-1) > 1e-6 {
			t.Fatalf("vector %d has length %v", i, n)
		}
		if want := float64(i) / math.Sqrt(float64(i*i+2)); math.Abs(float64(v[0])-want) > 1e-6 {
			t.Fatalf("vector %d is %v: out of order", i, v)
		}
	}
	f2 := &fakeRunner{}
	s2 := New(f2, fakeInfo, Config{MaxBatchInputs: 32, MaxBatchTokens: 25})
	defer s2.Close()
	if _, err := s2.Embed(context.Background(), inputsOf(5, 10, 0)); err != nil {
		t.Fatal(err)
	}
	if got := f2.sizes(); !slices.Equal(got, []int{2, 2, 1}) {
		t.Errorf("batches %v, want [2 2 1] (25 tokens a batch)", got)
	}
}

// TestConcurrentRequestsShareBatches: requests that wait while a batch
// runs go into the next batch together; a request whose caller left has
// its inputs dropped before they cost a forward pass.
func TestConcurrentRequestsShareBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRunner{gate: make(chan struct{}), started: make(chan int)}
		s := New(f, fakeInfo, Config{})
		var wg sync.WaitGroup
		wg.Go(func() { s.Embed(context.Background(), inputsOf(1, 1, 0)) })
		<-f.started // the first batch runs and blocks
		ctx, cancel := context.WithCancel(context.Background())
		var gone error
		wg.Go(func() { _, gone = s.Embed(ctx, inputsOf(4, 1, 100)) })
		for k := range 3 {
			wg.Go(func() {
				if _, err := s.Embed(context.Background(), inputsOf(2, 1, 10*k)); err != nil {
					t.Error(err)
				}
			})
		}
		synctest.Wait()
		cancel()
		synctest.Wait()
		f.gate <- struct{}{}
		if n := <-f.started; n != 6 {
			t.Errorf("second batch has %d inputs, want 6 (3 requests of 2; the cancelled one's 4 dropped)", n)
		}
		f.gate <- struct{}{}
		wg.Wait()
		if !errors.Is(gone, context.Canceled) {
			t.Errorf("cancelled request: %v", gone)
		}
		s.Close()
	})
}

// TestQueueFullAndClose: inputs beyond MaxQueueInputs are refused at once;
// Close fails the waiting requests and every later one.
func TestQueueFullAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRunner{gate: make(chan struct{}), started: make(chan int)}
		s := New(f, fakeInfo, Config{MaxQueueInputs: 4})
		var wg sync.WaitGroup
		var first, waiting error
		wg.Go(func() { _, first = s.Embed(context.Background(), inputsOf(1, 1, 0)) })
		<-f.started
		wg.Go(func() { _, waiting = s.Embed(context.Background(), inputsOf(3, 1, 0)) })
		synctest.Wait()
		if _, err := s.Embed(context.Background(), inputsOf(2, 1, 0)); !errors.Is(err, ErrQueueFull) {
			t.Errorf("over the queue bound: %v, want ErrQueueFull", err)
		}
		wg.Go(s.Close)
		synctest.Wait()
		f.gate <- struct{}{}
		wg.Wait()
		if first != nil {
			t.Errorf("the batch in progress: %v", first)
		}
		if !errors.Is(waiting, ErrClosed) {
			t.Errorf("waiting request: %v, want ErrClosed", waiting)
		}
		if _, err := s.Embed(context.Background(), inputsOf(1, 1, 0)); !errors.Is(err, ErrClosed) {
			t.Errorf("after Close: %v, want ErrClosed", err)
		}
	})
}

// TestLoad: Load counts the inputs of the batch being computed as running
// and the queued ones as waiting, and both fall to zero when the work is
// done.
func TestLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRunner{gate: make(chan struct{}), started: make(chan int)}
		s := New(f, fakeInfo, Config{MaxBatchInputs: 2})
		defer s.Close()
		if w, r := s.Load(); w != 0 || r != 0 {
			t.Errorf("idle: waiting %d running %d, want 0 0", w, r)
		}
		var wg sync.WaitGroup
		wg.Go(func() { s.Embed(context.Background(), inputsOf(2, 1, 0)) })
		<-f.started
		wg.Go(func() { s.Embed(context.Background(), inputsOf(3, 1, 0)) })
		synctest.Wait()
		if w, r := s.Load(); w != 3 || r != 2 {
			t.Errorf("one batch of 2 computing, 3 inputs queued: waiting %d running %d", w, r)
		}
		for range 2 { // the first batch, then the second (2 of the 3)
			f.gate <- struct{}{}
			<-f.started
		}
		if w, r := s.Load(); w != 0 || r != 1 {
			t.Errorf("the last input computing: waiting %d running %d, want 0 1", w, r)
		}
		f.gate <- struct{}{}
		wg.Wait()
		synctest.Wait()
		if w, r := s.Load(); w != 0 || r != 0 {
			t.Errorf("done: waiting %d running %d, want 0 0", w, r)
		}
	})
}

// TestBadInputsAndRunnerError: empty inputs, over-long ones and token ids
// outside the vocabulary are refused before queueing; a runner error fails
// the requests of its batch.
func TestBadInputsAndRunnerError(t *testing.T) {
	f := &fakeRunner{}
	s := New(f, fakeInfo, Config{MaxBatchTokens: 50})
	defer s.Close()
	for name, in := range map[string][][]int32{
		"none": {}, "empty": {{}}, "long": inputsOf(1, 51, 0), "vocab": {{1000}}, "negative": {{-1}},
	} {
		if _, err := s.Embed(context.Background(), in); !errors.Is(err, ErrBadInput) && !errors.Is(err, ErrTooLong) {
			t.Errorf("%s: %v, want a bad input", name, err)
		}
	}
	if len(f.sizes()) != 0 {
		t.Errorf("bad inputs reached the model: %v", f.sizes())
	}
	if s.Info().Context != 50 {
		t.Errorf("Info().Context %d, want the batch bound 50", s.Info().Context)
	}
	boom := errors.New("boom")
	f.err = boom
	if _, err := s.Embed(context.Background(), inputsOf(3, 1, 0)); !errors.Is(err, boom) {
		t.Errorf("runner failure: %v", err)
	}
}

func TestTruncate(t *testing.T) {
	v := Truncate([]float32{3, 4, 12}, 2)
	if len(v) != 2 || math.Abs(float64(v[0])-0.6) > 1e-7 || math.Abs(float64(v[1])-0.8) > 1e-7 {
		t.Errorf("Truncate = %v, want [0.6 0.8]", v)
	}
	if d := KnownDims("nomic-embed-text-v1.5", 768); !slices.Equal(d, []int{64, 128, 256, 512, 768}) {
		t.Errorf("KnownDims(nomic) = %v", d)
	}
	if d := KnownDims("tandem-synth-tiny", 256); d != nil {
		t.Errorf("KnownDims(unknown) = %v, want none", d)
	}
}

// TestMetricsLint: the service's metrics pass promlint (the linter behind
// `promtool check metrics`) once each has a sample.
func TestMetricsLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := New(&fakeRunner{}, fakeInfo, Config{})
	defer s.Close()
	if err := s.Register(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Embed(context.Background(), inputsOf(2, 3, 0)); err != nil {
		t.Fatal(err)
	}
	s.Embed(context.Background(), nil) // a bad_input outcome
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 7 {
		t.Errorf("%d metric families, want 7", len(mfs))
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
