package discovery

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// fakeAPIServer serves GET /api/v1/namespaces/NS/pods as the API server
// does, in JSON: lists, watches, and watch-lists (sendInitialEvents, ended
// by a bookmark). Events the test sends go to every open watch.
type fakeAPIServer struct {
	t  *testing.T
	ns string

	mu       sync.Mutex
	pods     map[string]*corev1.Pod
	rv       int
	requests []string // method path?query
	watchers []chan []byte
}

func newFakeAPIServer(t *testing.T, ns string, pods ...*corev1.Pod) (*fakeAPIServer, *httptest.Server) {
	f := &fakeAPIServer{t: t, ns: ns, pods: map[string]*corev1.Pod{}}
	for _, p := range pods {
		f.rv++
		p.ResourceVersion = strconv.Itoa(f.rv)
		f.pods[p.Name] = p
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func podJSON(p *corev1.Pod) json.RawMessage {
	p = p.DeepCopy()
	p.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	b, _ := json.Marshal(p)
	return b
}

func event(typ string, obj json.RawMessage) []byte {
	b, _ := json.Marshal(map[string]any{"type": typ, "object": obj})
	return append(b, '\n')
}

func (f *fakeAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
	f.mu.Unlock()
	if r.Method != http.MethodGet || r.URL.Path != "/api/v1/namespaces/"+f.ns+"/pods" {
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":404}`, http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	w.Header().Set("Content-Type", "application/json")
	if q.Get("watch") != "true" && q.Get("watch") != "1" {
		f.mu.Lock()
		list := map[string]any{"kind": "PodList", "apiVersion": "v1", "metadata": map[string]any{"resourceVersion": strconv.Itoa(f.rv)}}
		var items []json.RawMessage
		for _, p := range f.pods {
			items = append(items, podJSON(p))
		}
		list["items"] = items
		f.mu.Unlock()
		json.NewEncoder(w).Encode(list)
		return
	}
	ch := make(chan []byte, 16)
	f.mu.Lock()
	var initial [][]byte
	if q.Get("sendInitialEvents") == "true" {
		for _, p := range f.pods {
			initial = append(initial, event("ADDED", podJSON(p)))
		}
		bm := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.Itoa(f.rv),
			Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
		initial = append(initial, event("BOOKMARK", podJSON(bm)))
	}
	f.watchers = append(f.watchers, ch)
	f.mu.Unlock()
	fl := w.(http.Flusher)
	w.WriteHeader(http.StatusOK)
	for _, e := range initial {
		w.Write(e)
	}
	fl.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case e := <-ch:
			w.Write(e)
			fl.Flush()
		}
	}
}

// send changes a pod (or deletes it, typ DELETED) and tells every watch.
func (f *fakeAPIServer) send(typ string, p *corev1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rv++
	p.ResourceVersion = strconv.Itoa(f.rv)
	if typ == "DELETED" {
		delete(f.pods, p.Name)
	} else {
		f.pods[p.Name] = p
	}
	for _, ch := range f.watchers {
		ch <- event(typ, podJSON(p))
	}
}

// waitMembers waits, up to a deadline, for a snapshot on updates whose
// members are want.
func waitMembers(t *testing.T, updates <-chan Snapshot, what string, want ...string) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	var got []string
	for {
		select {
		case s := <-updates:
			if got = brief(s.Members); strings.Join(got, "|") == strings.Join(want, "|") {
				return
			}
		case <-deadline.C:
			t.Fatalf("%s: members %q, want %q", what, got, want)
		}
	}
}

// TestK8sFromConfig: the REST client NewK8sFromConfig builds lists and
// watches pods over HTTP, with the selector, GETs only, and the source
// follows the changes.
func TestK8sFromConfig(t *testing.T) {
	f, srv := newFakeAPIServer(t, testNS, pod("d0", withIP("10.0.0.1"), withReady(true)))
	c, _, _ := testCommon()
	src, err := NewK8sFromConfig(&rest.Config{Host: srv.URL}, K8sOptions{Common: c, Namespace: testNS, Selector: "app=tandem"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	updates := make(chan Snapshot, 64)
	go func() { done <- src.Run(ctx, func(s Snapshot) { updates <- s }) }()
	waitMembers(t, updates, "listed", "tandem/d0 http://10.0.0.1:8200 decode ready")

	f.send("ADDED", pod("p0", withLabel(RoleLabel, "prefill"), withIP("10.0.0.2"), withReady(true)))
	waitMembers(t, updates, "added", "tandem/d0 http://10.0.0.1:8200 decode ready", "tandem/p0 http://10.0.0.2:8200 prefill ready")
	term := pod("d0", withIP("10.0.0.1"), withReady(true))
	now := metav1.Now()
	term.DeletionTimestamp = &now
	f.send("MODIFIED", term)
	waitMembers(t, updates, "terminating", "tandem/d0 http://10.0.0.1:8200 decode unready(terminating)", "tandem/p0 http://10.0.0.2:8200 prefill ready")
	f.send("DELETED", term)
	waitMembers(t, updates, "deleted", "tandem/p0 http://10.0.0.2:8200 prefill ready")

	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.requests {
		if !strings.HasPrefix(r, "GET /api/v1/namespaces/tandem/pods?") || !strings.Contains(r, "labelSelector=app%3Dtandem") {
			t.Errorf("request %s", r)
		}
	}
	t.Logf("requests: %q", f.requests)
}
