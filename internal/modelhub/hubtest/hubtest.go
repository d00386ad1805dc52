package hubtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is the fake hub (Hub, the HF_ENDPOINT) and its CDN.
type Server struct {
	Hub, CDN *httptest.Server

	mu       sync.Mutex
	repos    map[string]*repo
	blobs    map[string][]byte // by sha256 hex
	cuts     []int64           // the next responses' cuts, in order
	failCDN  []int             // the next CDN responses' error statuses, in order
	hangNext int64
	noRange  bool
	endless  bool
	noLinked bool
	dripNext time.Duration
	failNext *failure
	stats    Stats
	client   *http.Client // NewInMemory's
}

type failure struct {
	status int
	msg    string
}

type repo struct {
	files map[string]string // name -> sha256 hex of its content
	wrong map[string]bool   // names whose announced hash is wrong
	names []string          // every listed name
	token string            // non-empty: the repo answers 401 without this bearer token
}

// Stats records what the servers were asked.
type Stats struct {
	// HubRequests and CDNRequests count requests to each server.
	HubRequests, CDNRequests int
	// HubAuth and CDNAuth are the Authorization headers each server got,
	// one per request ("" when none).
	HubAuth, CDNAuth []string
	// Ranges are the Range headers the CDN got, one per request.
	Ranges []string
}

// New starts the two servers; they close when the test ends.
func New(t testing.TB) *Server {
	s := &Server{repos: map[string]*repo{}, blobs: map[string][]byte{}}
	s.Hub = httptest.NewServer(http.HandlerFunc(s.serveHub))
	s.CDN = httptest.NewServer(http.HandlerFunc(s.serveCDN))
	t.Cleanup(s.Hub.Close)
	t.Cleanup(s.CDN.Close)
	return s
}

// NewInMemory is New over in-memory connections (net.Pipe) instead of
// loopback sockets: the hub is http://hub.test, the CDN http://cdn.test,
// and only Client reaches them. Called inside a testing/synctest bubble,
// everything it starts belongs to the bubble.
func NewInMemory(t testing.TB) *Server {
	s := &Server{repos: map[string]*repo{}, blobs: map[string][]byte{}}
	ls := map[string]*memListener{}
	start := func(host string, h http.HandlerFunc) *httptest.Server {
		srv := httptest.NewUnstartedServer(h)
		srv.Listener.Close() // the loopback listener it made
		l := &memListener{addr: memAddr(host + ":80"), conns: make(chan net.Conn), done: make(chan struct{})}
		ls[string(l.addr)] = l
		srv.Listener = l
		srv.Start()
		t.Cleanup(srv.Close)
		return srv
	}
	s.Hub = start("hub.test", s.serveHub)
	s.CDN = start("cdn.test", s.serveCDN)
	tr := &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		l, ok := ls[addr]
		if !ok {
			return nil, fmt.Errorf("hubtest: no in-memory server at %s", addr)
		}
		return l.dial(ctx)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	s.client = &http.Client{Transport: tr}
	return s
}

// Client returns the client that reaches a NewInMemory server (nil for
// New's, which any client reaches).
func (s *Server) Client() *http.Client { return s.client }

// memListener is a net.Listener whose connections are net.Pipe ends.
type memListener struct {
	addr  memAddr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

type memAddr string

func (a memAddr) Network() string { return "mem" }
func (a memAddr) String() string  { return string(a) }

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return l.addr }

func (l *memListener) dial(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, fmt.Errorf("hubtest: %s is closed", l.addr)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *Server) repo(name string) *repo {
	r := s.repos[name]
	if r == nil {
		r = &repo{files: map[string]string{}, wrong: map[string]bool{}}
		s.repos[name] = r
	}
	return r
}

// AddFile puts a downloadable file in a repository ("ORG/REPO").
func (s *Server) AddFile(repoName, name string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	s.blobs[h] = slices.Clone(data)
	r := s.repo(repoName)
	r.files[name] = h
	r.names = append(r.names, name)
}

// AddName lists a file name in a repository without content (for file
// selection tests).
func (s *Server) AddName(repoName, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repo(repoName)
	r.names = append(r.names, name)
}

// RequireToken makes a repository answer 401 unless the request carries
// "Authorization: Bearer token".
func (s *Server) RequireToken(repoName, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repo(repoName).token = token
}

// WrongHash makes the hub announce a wrong sha256 for a file.
func (s *Server) WrongHash(repoName, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repo(repoName).wrong[name] = true
}

// CutNext makes the next CDN response stop after n body bytes (the
// connection closes with the announced length unmet). Calls add up: two
// calls cut the next two responses, in the order given.
func (s *Server) CutNext(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cuts = append(s.cuts, n)
}

// FailCDNNext makes the next CDN response answer status (e.g. 503) with no
// body. Calls add up as CutNext's do; a failed response takes no cut.
func (s *Server) FailCDNNext(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failCDN = append(s.failCDN, status)
}

// HangNext makes the next CDN response send n body bytes and then nothing
// until the client gives up.
func (s *Server) HangNext(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hangNext = n
}

// NoRange makes the CDN ignore Range headers and answer 200 with the whole file.
func (s *Server) NoRange(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noRange = v
}

// Endless makes the hub announce no size (no X-Linked-Size, and no sizes
// in listings) and the CDN send no Content-Length and never end: it sends
// the file's bytes over and over until the client goes away.
func (s *Server) Endless(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endless = v
}

// NoLinkedSize makes the hub's /resolve/ answers carry no X-Linked-Size
// (listings with ?blobs=true still give sizes, the CDN its
// Content-Length).
func (s *Server) NoLinkedSize(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noLinked = v
}

// DripNext makes the next CDN response send its body one byte every d.
func (s *Server) DripNext(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dripNext = d
}

// FailNext makes the next hub request answer status with {"error": msg}.
func (s *Server) FailNext(status int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext = &failure{status, msg}
}

// Stats returns a copy of the request record.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.HubAuth = slices.Clone(st.HubAuth)
	st.CDNAuth = slices.Clone(st.CDNAuth)
	st.Ranges = slices.Clone(st.Ranges)
	return st
}

func (s *Server) serveHub(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.HubRequests++
	s.stats.HubAuth = append(s.stats.HubAuth, r.Header.Get("Authorization"))
	if f := s.failNext; f != nil {
		s.failNext = nil
		b, _ := json.Marshal(map[string]string{"error": f.msg})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		w.Write(b)
		return
	}
	p := strings.TrimPrefix(r.URL.Path, "/")
	if rest, ok := strings.CutPrefix(p, "api/models/"); ok {
		name, _, _ := strings.Cut(rest, "/revision/")
		rp := s.repos[name]
		if !s.allowed(w, r, rp) {
			return
		}
		type lfs struct {
			SHA256 string `json:"sha256"`
			Size   int    `json:"size"`
		}
		type sib struct {
			RFilename string `json:"rfilename"`
			Size      *int   `json:"size,omitempty"`
			LFS       *lfs   `json:"lfs,omitempty"`
		}
		out := struct {
			ID       string `json:"id"`
			Siblings []sib  `json:"siblings"`
		}{ID: name}
		for _, n := range rp.names {
			sb := sib{RFilename: n}
			// As the hub: sizes (and LFS metadata) only with ?blobs=true.
			if h, ok := rp.files[n]; ok && r.URL.Query().Get("blobs") == "true" && !s.endless {
				size := len(s.blobs[h])
				sb.Size, sb.LFS = &size, &lfs{h, size}
			}
			out.Siblings = append(out.Siblings, sb)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
		return
	}
	segs := strings.SplitN(p, "/", 5)
	if len(segs) < 5 || segs[2] != "resolve" {
		http.Error(w, `{"error":"Not Found"}`, http.StatusNotFound)
		return
	}
	rp := s.repos[segs[0]+"/"+segs[1]]
	if !s.allowed(w, r, rp) {
		return
	}
	h, ok := rp.files[segs[4]]
	if !ok {
		w.Header().Set("X-Error-Code", "EntryNotFound")
		http.Error(w, `{"error":"Entry not found"}`, http.StatusNotFound)
		return
	}
	announced := h
	if rp.wrong[segs[4]] {
		sum := sha256.Sum256([]byte("not the content"))
		announced = hex.EncodeToString(sum[:])
	}
	w.Header().Set("X-Linked-Etag", `"`+announced+`"`)
	w.Header().Set("ETag", `"`+announced+`"`)
	if !s.endless && !s.noLinked {
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(s.blobs[h])))
	}
	http.Redirect(w, r, s.CDN.URL+"/blobs/"+h+"?name="+url.QueryEscape(segs[4]), http.StatusFound)
}

// allowed answers 401 (as the hub does for missing and private repos alike)
// when rp is nil or wants a token the request lacks.
func (s *Server) allowed(w http.ResponseWriter, r *http.Request, rp *repo) bool {
	if rp == nil || (rp.token != "" && r.Header.Get("Authorization") != "Bearer "+rp.token) {
		w.Header().Set("X-Error-Code", "RepoNotFound")
		http.Error(w, `{"error":"Repository not found"}`, http.StatusUnauthorized)
		return false
	}
	return true
}

func (s *Server) serveCDN(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.stats.CDNRequests++
	s.stats.CDNAuth = append(s.stats.CDNAuth, r.Header.Get("Authorization"))
	s.stats.Ranges = append(s.stats.Ranges, r.Header.Get("Range"))
	data, ok := s.blobs[strings.TrimPrefix(r.URL.Path, "/blobs/")]
	fail := 0
	if len(s.failCDN) > 0 {
		fail, s.failCDN = s.failCDN[0], s.failCDN[1:]
	}
	var cut int64
	if len(s.cuts) > 0 && fail == 0 {
		cut, s.cuts = s.cuts[0], s.cuts[1:]
	}
	hang, noRange, endless, drip := s.hangNext, s.noRange, s.endless, s.dripNext
	s.hangNext, s.dripNext = 0, 0
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if fail != 0 {
		w.WriteHeader(fail)
		return
	}
	w.Header().Set("ETag", `"cdn-etag-not-a-sha256"`)
	if endless {
		w.WriteHeader(http.StatusOK) // no Content-Length: chunked
		for r.Context().Err() == nil {
			if _, err := w.Write(data); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
		return
	}
	status, body := http.StatusOK, data
	if rg := r.Header.Get("Range"); rg != "" && !noRange {
		var from int
		if _, err := fmt.Sscanf(rg, "bytes=%d-", &from); err != nil || from < 0 {
			http.Error(w, "bad range", http.StatusBadRequest)
			return
		}
		if from >= len(data) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(data)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		status, body = http.StatusPartialContent, data[from:]
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, len(data)-1, len(data)))
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if drip > 0 {
		for i := range body {
			if _, err := w.Write(body[i : i+1]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-time.After(drip):
			case <-r.Context().Done():
				return
			}
		}
		return
	}
	if cut > 0 && cut < int64(len(body)) {
		w.Write(body[:cut])
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		panic(http.ErrAbortHandler) // close the connection mid-body
	}
	if hang > 0 && hang < int64(len(body)) {
		w.Write(body[:hang])
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		<-r.Context().Done()
		return
	}
	w.Write(body)
}
