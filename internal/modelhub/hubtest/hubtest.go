// Package hubtest is a fake Hugging Face hub for tests: a hub server that
// answers the model API and redirects /resolve/ downloads, as the real hub
// does, to a second "CDN" server that serves the bytes with Range support.
package hubtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Server is the fake hub (Hub, the HF_ENDPOINT) and its CDN.
type Server struct {
	Hub, CDN *httptest.Server

	mu       sync.Mutex
	repos    map[string]*repo
	blobs    map[string][]byte // by sha256 hex
	cutNext  int64
	hangNext int64
	noRange  bool
	stats    Stats
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
// connection closes with the announced length unmet).
func (s *Server) CutNext(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cutNext = n
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
	p := strings.TrimPrefix(r.URL.Path, "/")
	if rest, ok := strings.CutPrefix(p, "api/models/"); ok {
		name, _, _ := strings.Cut(rest, "/revision/")
		rp := s.repos[name]
		if !s.allowed(w, r, rp) {
			return
		}
		type sib struct {
			RFilename string `json:"rfilename"`
		}
		out := struct {
			ID       string `json:"id"`
			Siblings []sib  `json:"siblings"`
		}{ID: name}
		for _, n := range rp.names {
			out.Siblings = append(out.Siblings, sib{n})
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
	w.Header().Set("X-Linked-Size", strconv.Itoa(len(s.blobs[h])))
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
	cut, hang, noRange := s.cutNext, s.hangNext, s.noRange
	s.cutNext, s.hangNext = 0, 0
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("ETag", `"cdn-etag-not-a-sha256"`)
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
