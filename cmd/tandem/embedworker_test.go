package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"tandem/internal/embed"
	"tandem/internal/engine/model"
	"tandem/internal/pd/room"
	"tandem/internal/router/pool"
)

// gatedRunner embeds each input as (first id, 1) once gate is closed; it
// announces each batch on started.
type gatedRunner struct{ gate, started chan struct{} }

func (g gatedRunner) Embed(inputs [][]int32) ([][]float32, error) {
	g.started <- struct{}{}
	<-g.gate
	out := make([][]float32, len(inputs))
	for i, in := range inputs {
		out[i] = []float32{float32(in[0]), 1}
	}
	return out, nil
}

// TestEmbedWorkerPD: an embedding worker answers /pd/info and /pd/status
// as the router's pool reads them: the pool takes the worker in, sees its
// load (inputs computing and queued) in /pd/status and the same instance
// id as /pd/info's, and keeps out a worker whose /pd/status names the other
// role.
func TestEmbedWorkerPD(t *testing.T) {
	g := gatedRunner{gate: make(chan struct{}), started: make(chan struct{}, 3)}
	svc := embed.New(g, embed.Info{Name: "emb", Dim: 2, Context: 64, Vocab: 100, Pooling: model.PoolMean}, embed.Config{MaxBatchInputs: 1})
	defer svc.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	release := sync.OnceFunc(func() { close(g.gate) }) // every batch runs through
	defer release()
	const instance = "0123456789abcdef"
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, `{"status":"ready"}`) })
	mux.Handle("/pd/", embedPDHandler(room.RoleDecode, svc, instance))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	var info pool.Info
	getJSONDoc(t, srv.URL+"/pd/info", &info)
	if info.Role != "decode" || info.Model != "emb" || !info.EmbeddingsOnly || info.Instance != instance {
		t.Errorf("/pd/info %+v", info)
	}

	// one input computing, two waiting
	for i := range 3 {
		wg.Go(func() {
			if _, err := svc.Embed(context.Background(), [][]int32{{int32(i + 1)}}); err != nil {
				t.Error(err)
			}
		})
		if i == 0 {
			<-g.started
		}
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if w, _ := svc.Load(); w == 2 || time.Now().After(deadline) {
			break
		}
	}
	var st pool.Status
	getJSONDoc(t, srv.URL+"/pd/status", &st)
	if st.Role != "decode" || st.Waiting != 2 || st.Running != 1 || st.Instance != instance {
		t.Errorf("/pd/status %+v, want role decode, 2 waiting, 1 running, instance %s", st, instance)
	}

	p, err := pool.New(poolConfig(nil, []string{srv.URL}))
	if err != nil {
		t.Fatal(err)
	}
	p.Check(context.Background())
	d := p.Debug()
	if len(d) != 1 || !d[0].Healthy || d[0].Waiting == nil || *d[0].Waiting != 2 || d[0].Running == nil || *d[0].Running != 1 || d[0].Instance != instance {
		t.Errorf("the router's view of the worker: %+v", d)
	}
	release()
	wg.Wait()

	// given as a prefill worker, the decode worker stays out
	wrong, err := pool.New(poolConfig([]string{srv.URL}, nil))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		wrong.Check(context.Background())
	}
	if d := wrong.Debug(); len(d) != 1 || d[0].Healthy {
		t.Errorf("a decode embedding worker given as prefill: %+v, want it out", d)
	}
}

func getJSONDoc(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// poolConfig is a router pool's configuration for the given workers, its
// log discarded.
func poolConfig(prefill, decode []string) pool.Config {
	return pool.Config{Prefill: prefill, Decode: decode, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		HealthTimeout: 5 * time.Second, InfoTimeout: 5 * time.Second, BreakerFailures: 3, BreakerCooldown: time.Second}
}
