package embed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tandem/internal/engine/model"
)

// Errors Embed returns (wrapped).
var (
	ErrQueueFull    = errors.New("embedding queue is full")
	ErrClosed       = errors.New("embedding service is closed")
	ErrTooLong      = errors.New("input is longer than the model's context")
	ErrBadInput     = errors.New("bad input")
	ErrNotEmbedding = errors.New("not an embedding model")
)

// Runner is a model's batched forward pass: one pooled (not normalized)
// vector per input. It is called from one goroutine at a time.
type Runner interface {
	Embed(inputs [][]int32) ([][]float32, error)
}

// Info describes the model a Service serves.
type Info struct {
	Name    string
	Arch    string
	Dim     int // vector length
	Context int // the longest input, in tokens
	Vocab   int
	Pooling model.Pooling
	// Dims lists the truncated lengths the model was trained to allow
	// (Matryoshka); empty means only Dim.
	Dims []int
}

// Config bounds the batches and the queue; zero fields take the defaults.
type Config struct {
	MaxBatchInputs int // default 32
	MaxBatchTokens int // default 4096
	MaxQueueInputs int // default 1024
}

// Defaults of Config.
const (
	DefaultMaxBatchInputs = 32
	DefaultMaxBatchTokens = 4096
	DefaultMaxQueueInputs = 1024
)

func (c Config) withDefaults() Config {
	if c.MaxBatchInputs <= 0 {
		c.MaxBatchInputs = DefaultMaxBatchInputs
	}
	if c.MaxBatchTokens <= 0 {
		c.MaxBatchTokens = DefaultMaxBatchTokens
	}
	if c.MaxQueueInputs <= 0 {
		c.MaxQueueInputs = DefaultMaxQueueInputs
	}
	return c
}

// job is one Embed call.
type job struct {
	inputs  [][]int32
	mu      sync.Mutex // guards out, left and err: the loop delivers, Close fails
	out     [][]float32
	left    int
	err     error
	done    chan struct{}
	dropped atomic.Bool // the caller left: skip what is not yet in a batch
}

// item is one input of a job, waiting in the queue.
type item struct {
	j *job
	i int
}

// Service batches embedding requests onto one Runner. Make it with New.
type Service struct {
	run  Runner
	info Info
	cfg  Config
	met  *metrics

	mu      sync.Mutex
	queue   []item
	running int // inputs of the batch the loop computes now
	closed  bool
	wake    chan struct{} // a token when the queue may have work
	stopped chan struct{} // closed when the loop has ended
}

// New starts a Service over run. Close stops it.
func New(run Runner, info Info, cfg Config) *Service {
	s := &Service{run: run, info: info, cfg: cfg.withDefaults(), met: newMetrics(),
		wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	s.cfg.MaxBatchTokens = max(s.cfg.MaxBatchTokens, 1)
	go s.loop()
	return s
}

// Info returns what the service serves. Context is at most
// Config.MaxBatchTokens: an input must fit one batch.
func (s *Service) Info() Info {
	in := s.info
	in.Context = min(in.Context, s.cfg.MaxBatchTokens)
	return in
}

// Config returns the service's bounds, defaults filled in.
func (s *Service) Config() Config { return s.cfg }

// Register adds the service's metrics to reg.
func (s *Service) Register(reg prometheus.Registerer) error { return s.met.register(reg) }

// Close fails every waiting call with ErrClosed and stops the loop after
// the batch in progress; it is idempotent.
func (s *Service) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.stopped
		return
	}
	s.closed = true
	q := s.queue
	s.queue = nil
	s.mu.Unlock()
	for _, it := range q {
		it.j.fail(ErrClosed)
	}
	s.met.queued.Set(0)
	s.signal()
	<-s.stopped
}

func (s *Service) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// fail ends the job with err unless it has ended.
func (j *job) fail(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.left <= 0 {
		return
	}
	j.left = 0
	j.err = err
	close(j.done)
}

// deliver records input i's vector, ending the job with its last one.
func (j *job) deliver(i int, v []float32) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.left <= 0 {
		return
	}
	j.out[i] = v
	if j.left--; j.left == 0 {
		close(j.done)
	}
}

// Embed returns one unit-length vector per input, in order.
func (s *Service) Embed(ctx context.Context, inputs [][]int32) ([][]float32, error) {
	start := time.Now()
	vecs, err := s.embed(ctx, inputs)
	s.met.observe(start, inputs, err)
	return vecs, err
}

func (s *Service) embed(ctx context.Context, inputs [][]int32) ([][]float32, error) {
	if len(inputs) == 0 {
		return nil, fmt.Errorf("embed: no inputs: %w", ErrBadInput)
	}
	limit := s.Info().Context
	for i, in := range inputs {
		if len(in) == 0 {
			return nil, fmt.Errorf("embed: input %d is empty: %w", i, ErrBadInput)
		}
		if len(in) > limit {
			return nil, fmt.Errorf("embed: input %d has %d tokens, the limit is %d: %w", i, len(in), limit, ErrTooLong)
		}
		for _, t := range in {
			if t < 0 || int(t) >= s.info.Vocab {
				return nil, fmt.Errorf("embed: input %d: token id %d is out of range 0..%d: %w", i, t, s.info.Vocab-1, ErrBadInput)
			}
		}
	}
	j := &job{inputs: inputs, out: make([][]float32, len(inputs)), left: len(inputs), done: make(chan struct{})}
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return nil, fmt.Errorf("embed: %w", ErrClosed)
	case len(s.queue)+len(inputs) > s.cfg.MaxQueueInputs:
		n := len(s.queue)
		s.mu.Unlock()
		return nil, fmt.Errorf("embed: %d inputs wait and %d more would pass the limit of %d; retry later: %w", n, len(inputs), s.cfg.MaxQueueInputs, ErrQueueFull)
	}
	for i := range inputs {
		s.queue = append(s.queue, item{j, i})
	}
	s.met.queued.Set(float64(len(s.queue)))
	s.mu.Unlock()
	s.signal()
	select {
	case <-j.done:
		j.mu.Lock()
		defer j.mu.Unlock()
		if j.err != nil {
			return nil, j.err
		}
		return j.out, nil
	case <-ctx.Done():
		j.dropped.Store(true)
		s.signal()
		return nil, fmt.Errorf("embed: %w", ctx.Err())
	}
}

// take removes the next batch from the queue: inputs in arrival order,
// skipping those of dropped jobs, up to the batch bounds (at least one).
func (s *Service) take() ([]item, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.running = 0
		return nil, false
	}
	var batch []item
	tokens, k := 0, 0
	for ; k < len(s.queue); k++ {
		it := s.queue[k]
		if it.j.dropped.Load() {
			continue
		}
		n := len(it.j.inputs[it.i])
		if len(batch) == s.cfg.MaxBatchInputs || (len(batch) > 0 && tokens+n > s.cfg.MaxBatchTokens) {
			break
		}
		batch = append(batch, it)
		tokens += n
	}
	s.queue = append(s.queue[:0:0], s.queue[k:]...)
	s.running = len(batch)
	s.met.queued.Set(float64(len(s.queue)))
	return batch, true
}

// Load returns the inputs waiting in the queue and those of the batch
// being computed: a worker's load as its /pd/status reports it.
func (s *Service) Load() (waiting, running int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue), s.running
}

func (s *Service) loop() {
	defer close(s.stopped)
	for {
		batch, ok := s.take()
		if !ok {
			return
		}
		if len(batch) == 0 {
			<-s.wake
			continue
		}
		s.runBatch(batch)
	}
}

// runBatch computes one batch and delivers its vectors (or its error) to
// the jobs it serves.
func (s *Service) runBatch(batch []item) {
	inputs := make([][]int32, len(batch))
	tokens := 0
	for k, it := range batch {
		inputs[k] = it.j.inputs[it.i]
		tokens += len(inputs[k])
	}
	start := time.Now()
	vecs, err := s.run.Embed(inputs)
	if err == nil && len(vecs) != len(inputs) {
		err = fmt.Errorf("model returned %d vectors for %d inputs", len(vecs), len(inputs))
	}
	s.met.batch(len(batch), tokens, time.Since(start))
	for k, it := range batch {
		j := it.j
		if err != nil {
			j.fail(fmt.Errorf("embed: %w", err))
			continue
		}
		v := vecs[k]
		model.Normalize(v)
		j.deliver(it.i, v)
	}
}

// Truncate returns v's first n dimensions normalized again (Matryoshka
// embeddings: a shorter prefix is itself an embedding).
func Truncate(v []float32, n int) []float32 {
	out := append([]float32(nil), v[:n]...)
	model.Normalize(out)
	return out
}

// cosine is the cosine similarity of a and b (tests, the comparison tool).
func cosine(a, b []float32) float64 {
	var d, na, nb float64
	for i := range a {
		d += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return d / math.Sqrt(na*nb)
}
