package modelhub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// DefaultEndpoint is the hub's base URL when HF_ENDPOINT is not set.
const DefaultEndpoint = "https://huggingface.co"

// Limits on what the hub may send.
const (
	// MaxRedirects is the most redirects one download follows.
	MaxRedirects = 10
	// MaxAPIBytes bounds the repository listing JSON.
	MaxAPIBytes = 32 << 20
	// DefaultStallTimeout is how long a download waits for the next byte (or
	// a response) before it gives up, keeping the partial file.
	DefaultStallTimeout = 60 * time.Second
	// DefaultProgressEvery is the least time between two Progress calls.
	DefaultProgressEvery = 200 * time.Millisecond
	// DefaultMaxBytes bounds a download whose length the hub does not
	// announce (no X-Linked-Size, no size in the listing): the hub takes
	// no file over 50 GB (bigger GGUFs are split, which tandem does not
	// load), so more than 50 GiB is not a model. $TANDEM_PULL_MAX_BYTES
	// changes it.
	DefaultMaxBytes = 50 << 30
	// DefaultTimeout bounds a whole download; the next pull resumes it.
	// Six hours fetch 40 GB at 2 MB/s. $TANDEM_PULL_TIMEOUT changes it.
	DefaultTimeout = 6 * time.Hour
	// DefaultMinRateBytes in DefaultRateWindow is the slowest a download
	// may go (about 8.5 KiB/s, a hundredth of a slow home line): fewer
	// bytes in a window stop it, keeping the partial file.
	DefaultMinRateBytes = 256 << 10
	DefaultRateWindow   = 30 * time.Second
	// DefaultRetries is how many times one Pull resumes a download that the
	// network cut (huggingface_hub's http_get also resumes five times), and
	// DefaultRetryWait the wait before the first of them, doubled for each
	// next one up to MaxRetryWait: 1, 2, 4, 8, 16 s.
	DefaultRetries   = 5
	DefaultRetryWait = time.Second
	MaxRetryWait     = 30 * time.Second
	// shownCandidates is how many file names an error lists; the rest are
	// counted. shownMessageBytes bounds a message from the hub.
	shownCandidates   = 20
	shownMessageBytes = 300
)

// Hub pulls GGUF files from a Hugging Face hub into a local,
// content-addressed cache. The zero value is not usable: set Dir and
// Endpoint, or use FromEnv.
type Hub struct {
	// Endpoint is the hub's base URL (scheme and host, maybe a path prefix),
	// without a trailing slash.
	Endpoint string
	// Token, when not empty, is sent as "Authorization: Bearer" to the
	// endpoint's host only, never to a host a redirect leads to.
	Token string
	// Dir is the cache folder (see DefaultDir).
	Dir string
	// Client makes the requests; nil means a client of the package's own.
	// Its CheckRedirect is replaced: the Hub follows redirects itself.
	Client *http.Client
	// Logger gets resume, cache hit and stall notes; nil discards them.
	Logger *slog.Logger
	// Progress, when set, is called during a download at most every
	// ProgressEvery and once more when it ends (Final true).
	Progress func(Progress)
	// ProgressEvery defaults to DefaultProgressEvery; StallTimeout to
	// DefaultStallTimeout.
	ProgressEvery time.Duration
	StallTimeout  time.Duration
	// MaxBytes bounds a download whose length the hub announces neither in
	// X-Linked-Size nor in the repository listing (a length only the CDN
	// gives must fit it too); default DefaultMaxBytes. A length the hub
	// announces is the bound instead.
	MaxBytes int64
	// Timeout bounds a whole download (default DefaultTimeout); fewer than
	// MinRateBytes in any RateWindow (defaults DefaultMinRateBytes,
	// DefaultRateWindow) stop it too. Either way the partial file is kept
	// and the next pull resumes.
	Timeout      time.Duration
	MinRateBytes int64
	RateWindow   time.Duration
	// Retries is how many times one Pull resumes a download cut by the
	// network (a reset connection, a body short of its length, nothing
	// received for StallTimeout, a 500, 502, 503 or 504 answer): it waits
	// RetryWait, doubled after each retry up to MaxRetryWait, asks the hub
	// again and sends Range from the partial file's end. 0 means
	// DefaultRetries, negative none. Too slow a download, the Timeout, a
	// checksum mismatch, a refusal (4xx) and a cancelled ctx are not
	// retried. Timeout bounds all the attempts together.
	Retries   int
	RetryWait time.Duration
}

// Progress reports a download's advance.
type Progress struct {
	// Reference and File say what is downloading.
	Reference, File string
	// Done counts bytes on disk, including those a resumed download started
	// with (Resumed); Total is the file's length, or -1 when unknown.
	Done, Resumed, Total int64
	// Final is set on the last call of a download, whether it succeeded.
	Final bool
}

// FromEnv returns a Hub configured as huggingface_hub is: the endpoint from
// $HF_ENDPOINT (default DefaultEndpoint), the token from $HF_TOKEN, and the
// cache folder from DefaultDir; $TANDEM_PULL_MAX_BYTES, $TANDEM_PULL_TIMEOUT
// and $TANDEM_PULL_RETRIES (0: none) set MaxBytes, Timeout and Retries.
func FromEnv() (*Hub, error) {
	dir, err := DefaultDir()
	if err != nil {
		return nil, err
	}
	ep := os.Getenv("HF_ENDPOINT")
	if ep == "" {
		ep = DefaultEndpoint
	}
	u, err := url.Parse(ep)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("HF_ENDPOINT %q is not an http(s) URL: set it to the hub's base URL, e.g. %s", ep, DefaultEndpoint)
	}
	h := &Hub{Endpoint: strings.TrimSuffix(ep, "/"), Token: strings.TrimSpace(os.Getenv("HF_TOKEN")), Dir: dir}
	if v := os.Getenv("TANDEM_PULL_MAX_BYTES"); v != "" {
		if h.MaxBytes, err = parseBytes(v); err != nil {
			return nil, fmt.Errorf("TANDEM_PULL_MAX_BYTES %q: %w", v, err)
		}
	}
	if v := os.Getenv("TANDEM_PULL_RETRIES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100 {
			return nil, fmt.Errorf("TANDEM_PULL_RETRIES %q is not a count from 0 (no retry) to 100", v)
		}
		if h.Retries = n; n == 0 {
			h.Retries = -1
		}
	}
	if v := os.Getenv("TANDEM_PULL_TIMEOUT"); v != "" {
		if h.Timeout, err = time.ParseDuration(v); err != nil || h.Timeout <= 0 {
			return nil, fmt.Errorf("TANDEM_PULL_TIMEOUT %q is not a positive duration such as 12h or 90m", v)
		}
	}
	return h, nil
}

// parseBytes reads a byte count: digits, optionally followed by K, M, G
// or T (powers of 1024, with or without "iB").
func parseBytes(v string) (int64, error) {
	num := strings.TrimRight(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(v), "B"), "i"), "KMGTkmgt")
	unit := strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(v), "B"), "i")[len(num):])
	n, err := strconv.ParseInt(num, 10, 64)
	shift := map[string]uint{"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[unit]
	if err != nil || n <= 0 || len(unit) > 1 || n > math.MaxInt64>>shift {
		return 0, errors.New("want a positive byte count such as 60G or 64424509440")
	}
	return n << shift, nil
}

func (h *Hub) maxBytes() int64 {
	if h.MaxBytes > 0 {
		return h.MaxBytes
	}
	return DefaultMaxBytes
}

var defaultClient = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	ForceAttemptHTTP2:     true,
	TLSHandshakeTimeout:   15 * time.Second,
	ResponseHeaderTimeout: 60 * time.Second,
	IdleConnTimeout:       90 * time.Second,
}}

func (h *Hub) client() *http.Client {
	c := defaultClient
	if h.Client != nil {
		c = h.Client
	}
	cc := *c
	cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cc
}

func (h *Hub) log() *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (h *Hub) endpoint() string { return strings.TrimSuffix(h.Endpoint, "/") }

// onHub reports whether u is on the endpoint's scheme and host (port
// included): the only place the token goes.
func (h *Hub) onHub(u *url.URL) bool {
	e, err := url.Parse(h.endpoint())
	return err == nil && strings.EqualFold(e.Scheme, u.Scheme) && strings.EqualFold(e.Host, u.Host)
}

// Resolve returns the cache entry of ref, pulling it first when it is not
// cached. A cached reference makes no network request.
func (h *Hub) Resolve(ctx context.Context, ref string) (Entry, error) {
	if e, ok, err := h.Lookup(ref); err != nil || ok {
		return e, err
	}
	return h.Pull(ctx, ref)
}

// Pull fetches ref into the cache and records its manifest. It always asks
// the hub which file and content the reference means now, but downloads only
// when that content is not already a blob; an interrupted download is
// resumed from its partial file.
func (h *Hub) Pull(ctx context.Context, ref string) (Entry, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return Entry{}, err
	}
	if r.Origin != "" {
		u, _ := url.Parse(r.Origin)
		if !h.onHub(u) {
			return Entry{}, fmt.Errorf("%s is not on the hub (%s): pull from huggingface.co, or set HF_ENDPOINT to %s if it is a hub mirror", ref, h.endpoint(), r.Origin)
		}
	}
	file := r.File
	listed := int64(-1) // the file's size in the listing, when it gives one
	if file == "" {
		files, sizes, err := h.listFiles(ctx, r.Repo, r.Revision)
		if err != nil {
			return Entry{}, err
		}
		if file, err = SelectFile(r.Repo, files, r.Quant); err != nil {
			return Entry{}, err
		}
		if n, ok := sizes[file]; ok {
			listed = n
		}
	} else if !strings.HasSuffix(strings.ToLower(file), ".gguf") {
		return Entry{}, fmt.Errorf("%s is not a .gguf file: tandem loads GGUF models", Printable(file))
	} else if splitName.MatchString(file) {
		return Entry{}, fmt.Errorf("%s is one part of a split GGUF, which tandem does not load: merge the parts with llama.cpp's `llama-gguf-split --merge` and pass the file with --model", Printable(file))
	}
	sha, size, err := h.fetchRetrying(ctx, r.String(), r.Repo, r.Revision, file, listed)
	if err != nil {
		return Entry{}, err
	}
	e := Entry{Reference: r.String(), Repo: r.Repo, Revision: r.Revision, File: file, Size: size, SHA256: sha,
		PulledAt: time.Now().UTC().Truncate(time.Second), Path: h.blobPath(sha)}
	if err := h.writeManifest(e); err != nil {
		return Entry{}, err
	}
	return e, nil
}

// retryable marks a download failure the network caused, which a new
// attempt may get past by resuming from the partial file.
// note, when set, says what happened without the advice to pull again,
// for the log line of a retry.
type retryable struct{ err, note error }

func (e *retryable) Error() string { return e.err.Error() }
func (e *retryable) Unwrap() error { return e.err }

func (e *retryable) logText() string {
	if e.note != nil {
		return e.note.Error()
	}
	return e.err.Error()
}

func (h *Hub) retries() (int, time.Duration) {
	n, wait := h.Retries, h.RetryWait
	if n == 0 {
		n = DefaultRetries
	}
	if wait <= 0 {
		wait = DefaultRetryWait
	}
	return max(n, 0), wait
}

// fetchRetrying runs fetch, and again after a retryable failure, up to
// h.Retries more times with a doubling wait between; h.Timeout bounds them
// all. Each attempt asks the hub afresh (a CDN address may have expired)
// and resumes from whatever the partial file holds.
func (h *Hub) fetchRetrying(ctx context.Context, ref, repo, rev, file string, listed int64) (string, int64, error) {
	lim := h.limits()
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	deadline := time.AfterFunc(lim.timeout, func() { cancel(errDeadline) })
	defer deadline.Stop()
	retries, wait := h.retries()
	for attempt := 0; ; attempt++ {
		sha, size, err := h.fetch(pctx, ref, repo, rev, file, listed)
		var re *retryable
		if err == nil || !errors.As(err, &re) {
			return sha, size, err
		}
		if attempt >= retries {
			if retries == 0 {
				return "", 0, err
			}
			return "", 0, fmt.Errorf("%w (gave up after %d retries)", err, retries)
		}
		h.log().Warn("download interrupted; resuming it", "file", file, "retry", attempt+1, "of", retries, "after", wait, "error", re.logText())
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-pctx.Done():
			t.Stop()
			return "", 0, fmt.Errorf("%w; waiting to resume, %w", err, fetchErr(pctx, ref, lim, context.Cause(pctx)))
		}
		wait = min(2*wait, MaxRetryWait)
	}
}

// listFiles returns the repository's file names from the hub's model API,
// and the sizes the listing gives (?blobs=true; LFS files' lfs.size, else
// size).
func (h *Hub) listFiles(ctx context.Context, repo, rev string) ([]string, map[string]int64, error) {
	u := h.endpoint() + "/api/models/" + repo
	if rev != DefaultRevision {
		u += "/revision/" + url.PathEscape(rev)
	}
	u += "?blobs=true"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("list the files of %s: %w", repo, err)
	}
	req.Header.Set("Accept", "application/json")
	if h.Token != "" {
		req.Header.Set("Authorization", "Bearer "+h.Token)
	}
	resp, err := h.client().Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("list the files of %s: GET %s: %w (check the network connection, or HF_ENDPOINT)", repo, u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, statusError(resp, "list the files of "+repo, u)
	}
	var info struct {
		Siblings []struct {
			RFilename string `json:"rfilename"`
			Size      *int64 `json:"size"`
			LFS       *struct {
				Size *int64 `json:"size"`
			} `json:"lfs"`
		} `json:"siblings"`
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxAPIBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("list the files of %s: read GET %s: %w", repo, u, err)
	}
	if len(b) > MaxAPIBytes {
		return nil, nil, fmt.Errorf("list the files of %s: GET %s answered more than %d bytes", repo, u, MaxAPIBytes)
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, nil, fmt.Errorf("list the files of %s: GET %s is not the hub's model JSON (%w): check HF_ENDPOINT", repo, u, err)
	}
	files := make([]string, 0, len(info.Siblings))
	sizes := map[string]int64{}
	for _, s := range info.Siblings {
		files = append(files, s.RFilename)
		switch {
		case s.LFS != nil && s.LFS.Size != nil && *s.LFS.Size >= 0:
			sizes[s.RFilename] = *s.LFS.Size
		case s.Size != nil && *s.Size >= 0:
			sizes[s.RFilename] = *s.Size
		}
	}
	return files, sizes, nil
}

// statusError describes an unexpected hub status and says what to do.
// The hub's own words (status text, message) are shown escaped and cut.
func statusError(resp *http.Response, what, u string) error {
	status := clipText(Printable(resp.Status), shownMessageBytes)
	msg := resp.Header.Get("X-Error-Message")
	if msg == "" {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		var j struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &j) == nil && j.Error != "" {
			msg = j.Error
		}
	}
	if msg != "" {
		msg = " (" + clipText(Printable(msg), shownMessageBytes) + ")"
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%s: %s answered %s%s: the repository is private, gated or does not exist; set HF_TOKEN to a token that can read it (for a gated model, accept its licence on the model page first) and check the repository name", what, u, status, msg)
	case http.StatusNotFound:
		return fmt.Errorf("%s: %s answered 404 Not Found%s: check the repository name, the revision and the file name", what, u, msg)
	case http.StatusTooManyRequests:
		return fmt.Errorf("%s: %s answered 429 Too Many Requests%s: wait a while, or set HF_TOKEN (signed-in requests have higher limits)", what, u, msg)
	}
	return fmt.Errorf("%s: %s answered %s%s", what, u, status, msg)
}

// digest is the checksum the hub announces for a file.
type digest struct {
	kind string // "sha256" (LFS files) or "sha1" (a git blob id)
	hex  string
}

// parseDigest reads an X-Linked-Etag or ETag value: a quoted sha256 (LFS) or
// git blob sha1, maybe weak (W/).
func parseDigest(v string) (digest, bool) {
	v = strings.TrimSpace(v)
	v = strings.TrimPrefix(v, "W/")
	v = strings.ToLower(strings.Trim(v, `"`))
	switch {
	case isHex(v, 64):
		return digest{"sha256", v}, true
	case isHex(v, 40):
		return digest{"sha1", v}, true
	}
	return digest{}, false
}

// Causes of a download's context ending.
var (
	errStalled  = errors.New("download stalled")
	errTooSlow  = errors.New("download too slow")
	errDeadline = errors.New("download past its deadline")
)

// limits are a download's time bounds (Hub's fields with their defaults).
type limits struct {
	stall, timeout, window time.Duration
	minRate                int64
}

func (h *Hub) limits() limits {
	l := limits{h.StallTimeout, h.Timeout, h.RateWindow, h.MinRateBytes}
	if l.stall <= 0 {
		l.stall = DefaultStallTimeout
	}
	if l.timeout <= 0 {
		l.timeout = DefaultTimeout
	}
	if l.window <= 0 {
		l.window = DefaultRateWindow
	}
	if l.minRate <= 0 {
		l.minRate = DefaultMinRateBytes
	}
	return l
}

// fetch downloads one file of a repository into the blob store unless its
// content is there already, and returns the blob's sha256 and size. listed
// is the file's size in the repository listing, or -1.
func (h *Hub) fetch(ctx context.Context, ref, repo, rev, file string, listed int64) (string, int64, error) {
	lim := h.limits()
	stall := lim.stall
	dctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watchdog := time.AfterFunc(stall, func() { cancel(errStalled) })
	defer watchdog.Stop()

	client := h.client()
	start := h.endpoint() + "/" + repo + "/resolve/" + url.PathEscape(rev) + "/" + escapeFile(file)
	cur, err := url.Parse(start)
	if err != nil {
		return "", 0, fmt.Errorf("download %s: %w", start, err)
	}
	var (
		want      digest
		known     bool
		total     int64 = -1
		announced bool  // total is the hub's (X-Linked-Size or the listing), not only the CDN's
		partial   string
		offset    int64
		resp      *http.Response
		fromBlob  = func() (string, int64, bool) {
			if want.kind != "sha256" {
				return "", 0, false
			}
			st, err := os.Stat(h.blobPath(want.hex))
			if err != nil || (total >= 0 && st.Size() != total) {
				return "", 0, false
			}
			return want.hex, st.Size(), true
		}
	)
	for hop := 0; ; hop++ {
		if hop > MaxRedirects {
			return "", 0, fmt.Errorf("download %s: more than %d redirects", start, MaxRedirects)
		}
		req, err := http.NewRequestWithContext(dctx, http.MethodGet, cur.String(), nil)
		if err != nil {
			return "", 0, fmt.Errorf("download %s: %w", cur, err)
		}
		hub := h.onHub(cur)
		if hub && h.Token != "" {
			req.Header.Set("Authorization", "Bearer "+h.Token)
		}
		if known && offset > 0 {
			req.Header.Set("Range", "bytes="+strconv.FormatInt(offset, 10)+"-")
		}
		resp, err = client.Do(req)
		if err != nil {
			return "", 0, mayRetry(dctx, fetchErr(dctx, cur.String(), lim, err))
		}
		watchdog.Reset(stall)
		if hub && !known && (resp.StatusCode < 400) {
			d, ok := parseDigest(resp.Header.Get("X-Linked-Etag"))
			if !ok {
				d, ok = parseDigest(resp.Header.Get("ETag"))
			}
			if ok {
				want, known = d, true
				if n, err := strconv.ParseInt(resp.Header.Get("X-Linked-Size"), 10, 64); err == nil && n >= 0 {
					total, announced = n, true
				} else if listed >= 0 {
					total, announced = listed, true
				}
				if sha, size, ok := fromBlob(); ok {
					resp.Body.Close()
					h.log().Info("already in the cache", "reference", ref, "file", file, "sha256", sha)
					return sha, size, nil
				}
				partial = h.partialPath(want.kind + "-" + want.hex)
				if st, err := os.Stat(partial); err == nil {
					offset = st.Size()
				}
			}
		}
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			loc, err := resp.Location()
			resp.Body.Close()
			if err != nil {
				return "", 0, fmt.Errorf("download %s: the %s answer has no usable Location: %w", cur, clipText(Printable(resp.Status), shownMessageBytes), err)
			}
			cur = loc
			continue
		}
		break
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK, resp.StatusCode == http.StatusPartialContent,
		resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && offset > 0:
	default:
		err := statusError(resp, "download "+Printable(file)+" of "+repo, cur.String())
		switch resp.StatusCode {
		case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return "", 0, &retryable{err: err}
		}
		return "", 0, err
	}
	if !known {
		return "", 0, fmt.Errorf("download %s: the hub sent no checksum (X-Linked-Etag or ETag) for %s, so the download cannot be verified; check HF_ENDPOINT", start, Printable(file))
	}
	switch resp.StatusCode {
	case http.StatusOK:
		if offset > 0 {
			h.log().Info("the server does not resume downloads; starting over", "file", file, "had", offset)
		}
		offset = 0
		if total < 0 && resp.ContentLength >= 0 {
			total = resp.ContentLength
		}
	case http.StatusPartialContent:
		first, size, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err != nil {
			return "", 0, fmt.Errorf("download %s: %w", cur, err)
		}
		if first != offset {
			os.Remove(partial)
			return "", 0, fmt.Errorf("download %s: asked for bytes from %d, got a range from %d; the partial download was deleted: run the pull again to start over", cur, offset, first)
		}
		if total < 0 {
			total = size
		} else if size >= 0 && size != total {
			os.Remove(partial)
			return "", 0, fmt.Errorf("download %s: Content-Range says %d bytes, the hub said %d; the partial download was deleted: run the pull again to start over", cur, size, total)
		}
		h.log().Info("resuming download", "file", file, "from", offset, "total", total)
	}
	if want.kind == "sha1" && total < 0 {
		return "", 0, fmt.Errorf("download %s: the server gave no length, needed to check the git blob id of %s", cur, Printable(file))
	}
	if !announced && total > h.maxBytes() {
		return "", 0, fmt.Errorf("download %s: the server says %s is %d bytes, but the hub announced no size, and without one a download may be at most %d bytes (TANDEM_PULL_MAX_BYTES); "+
			"raise it if this file is really that large", cur, Printable(file), total, h.maxBytes())
	}
	var body io.Reader = resp.Body
	if resp.StatusCode == http.StatusRequestedRangeNotSatisfiable {
		body = strings.NewReader("") // the partial file may be whole already; verify it
	}
	return h.store(dctx, cancel, ref, file, want, total, partial, offset, body, watchdog, lim, cur.String())
}

// fetchErr names the URL of a failed request and says why it failed.
func fetchErr(ctx context.Context, u string, lim limits, err error) error {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errStalled):
		return fmt.Errorf("download %s: nothing received for %s: check the network connection, then run the pull again", u, lim.stall)
	case errors.Is(cause, errTooSlow):
		return fmt.Errorf("download %s: the hub is too slow: fewer than %d bytes in %s; the download resumes on the next pull", u, lim.minRate, lim.window)
	case errors.Is(cause, errDeadline):
		return fmt.Errorf("download %s: not done after %s (TANDEM_PULL_TIMEOUT); the download resumes on the next pull", u, lim.timeout)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("download %s: %w", u, context.Cause(ctx))
	}
	return fmt.Errorf("download %s: %w (check the network connection, or HF_ENDPOINT)", u, err)
}

// mayRetry marks err retryable when the network caused it: the download
// stalled, or the connection failed while ctx still runs. Too slow a
// download, the deadline and a cancelled pull are final.
func mayRetry(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), errStalled) || ctx.Err() == nil {
		return &retryable{err: err}
	}
	return err
}

// parseContentRange reads "bytes FIRST-LAST/SIZE" (SIZE may be "*": -1).
func parseContentRange(v string) (first, size int64, err error) {
	rest, ok := strings.CutPrefix(v, "bytes ")
	rng, sz, ok2 := strings.Cut(rest, "/")
	a, _, ok3 := strings.Cut(rng, "-")
	if !ok || !ok2 || !ok3 {
		return 0, 0, fmt.Errorf("a 206 answer with a bad Content-Range %q", v)
	}
	if first, err = strconv.ParseInt(a, 10, 64); err != nil || first < 0 {
		return 0, 0, fmt.Errorf("a 206 answer with a bad Content-Range %q", v)
	}
	if sz == "*" {
		return first, -1, nil
	}
	if size, err = strconv.ParseInt(sz, 10, 64); err != nil || size < 0 {
		return 0, 0, fmt.Errorf("a 206 answer with a bad Content-Range %q", v)
	}
	return first, size, nil
}

// store appends body to the partial file from offset, verifies the whole
// file against want and moves it into the blob store. The download stops
// (through ctx's cancel) when the watchdog fires or fewer than lim.minRate
// bytes arrive in a lim.window; with total unknown it takes at most
// MaxBytes.
func (h *Hub) store(ctx context.Context, stop context.CancelCauseFunc, ref, file string, want digest, total int64, partial string, offset int64,
	body io.Reader, watchdog *time.Timer, lim limits, src string) (string, int64, error) {
	if err := os.MkdirAll(filepath.Dir(partial), 0o755); err != nil {
		return "", 0, fmt.Errorf("make the download folder: %w", err)
	}
	f, err := os.OpenFile(partial, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", 0, fmt.Errorf("open the partial download: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(offset); err != nil {
		return "", 0, fmt.Errorf("truncate the partial download: %w", err)
	}
	sum256 := sha256.New()
	hashes := []hash.Hash{sum256}
	var sum1 hash.Hash
	if want.kind == "sha1" {
		sum1 = sha1.New()
		fmt.Fprintf(sum1, "blob %d\x00", total)
		hashes = append(hashes, sum1)
	}
	ws := make([]io.Writer, len(hashes))
	for i, x := range hashes {
		ws[i] = x
	}
	hw := io.MultiWriter(ws...)
	if _, err := io.Copy(hw, io.NewSectionReader(f, 0, offset)); err != nil {
		return "", 0, fmt.Errorf("read the partial download: %w", err)
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return "", 0, fmt.Errorf("seek the partial download: %w", err)
	}
	pr := &progressWriter{h: h, p: Progress{Reference: ref, File: Printable(file), Done: offset, Resumed: offset, Total: total}}
	limit := h.maxBytes() - offset + 1 // no length: one byte over MaxBytes is detectable
	if total >= 0 {
		limit = total - offset + 1 // one byte over the announced length is detectable
	}
	wr := &watchReader{r: io.LimitReader(body, limit), t: watchdog, d: lim.stall}
	endRate := watchRate(ctx, wr, lim, stop)
	n, copyErr := io.Copy(io.MultiWriter(f, hw, pr), wr)
	endRate()
	pr.final()
	got := offset + n
	if copyErr != nil {
		err := fetchErr(ctx, src, lim, copyErr)
		full := mayRetry(ctx, fmt.Errorf("%w; the download stopped after %d of %s bytes and the partial file is kept (%s): run the same pull again to resume", err, got, sizeText(total), partial))
		if re, ok := full.(*retryable); ok {
			re.note = fmt.Errorf("%w; stopped after %d of %s bytes", err, got, sizeText(total))
		}
		return "", 0, full
	}
	if total < 0 && got > h.maxBytes() {
		f.Close()
		os.Remove(partial)
		return "", 0, fmt.Errorf("download %s: the hub announced no length for %s and sent more than %d bytes (TANDEM_PULL_MAX_BYTES), more than any model file it holds; the partial file was deleted: check HF_ENDPOINT", src, Printable(file), h.maxBytes())
	}
	if total >= 0 && got != total {
		if got > total {
			f.Close()
			os.Remove(partial)
			return "", 0, fmt.Errorf("download %s: more than the announced %d bytes arrived; the partial file was deleted: run the pull again", src, total)
		}
		return "", 0, &retryable{err: fmt.Errorf("download %s: the body ended after %d of %d bytes; the partial file is kept (%s): run the same pull again to resume", src, got, total, partial),
			note: fmt.Errorf("download %s: the body ended after %d of %d bytes", src, got, total)}
	}
	sha := hex.EncodeToString(sum256.Sum(nil))
	gotWant := sha
	if sum1 != nil {
		gotWant = hex.EncodeToString(sum1.Sum(nil))
	}
	if gotWant != want.hex {
		f.Close()
		os.Remove(partial)
		return "", 0, fmt.Errorf("download %s: %s mismatch: the hub announced %s, the %d bytes received hash to %s; the download was deleted: run the pull again, and if it fails the same way the file on the hub or a proxy in between is corrupt", src, want.kind, want.hex, got, gotWant)
	}
	if err := f.Sync(); err != nil {
		return "", 0, fmt.Errorf("flush the download: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", 0, fmt.Errorf("close the download: %w", err)
	}
	blob := h.blobPath(sha)
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return "", 0, fmt.Errorf("make the blob folder: %w", err)
	}
	if err := os.Rename(partial, blob); err != nil {
		return "", 0, fmt.Errorf("move the download into the cache: %w", err)
	}
	return sha, got, nil
}

func sizeText(total int64) string {
	if total < 0 {
		return "?"
	}
	return strconv.FormatInt(total, 10)
}

// watchRate stops the download (stop(errTooSlow)) when fewer than
// lim.minRate bytes of r arrive in a lim.window: a drip of bytes keeps the
// stall watchdog quiet, not this. The returned function ends the watch.
func watchRate(ctx context.Context, r *watchReader, lim limits, stop context.CancelCauseFunc) (end func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(lim.window)
		defer tk.Stop()
		var last int64
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-tk.C:
				n := r.read.Load()
				if n-last < lim.minRate {
					stop(errTooSlow)
					return
				}
				last = n
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// watchReader resets the stall watchdog after every read that returns
// data, and counts the bytes for the rate check.
type watchReader struct {
	r    io.Reader
	t    *time.Timer
	d    time.Duration
	read atomic.Int64
}

func (s *watchReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.t.Reset(s.d)
		s.read.Add(int64(n))
	}
	return n, err
}

// progressWriter counts downloaded bytes and calls the Hub's Progress,
// throttled.
type progressWriter struct {
	h    *Hub
	p    Progress
	last time.Time
}

func (w *progressWriter) Write(b []byte) (int, error) {
	w.p.Done += int64(len(b))
	if w.h.Progress == nil {
		return len(b), nil
	}
	every := w.h.ProgressEvery
	if every <= 0 {
		every = DefaultProgressEvery
	}
	if now := time.Now(); now.Sub(w.last) >= every {
		w.last = now
		w.h.Progress(w.p)
	}
	return len(b), nil
}

func (w *progressWriter) final() {
	if w.h.Progress != nil {
		w.p.Final = true
		w.h.Progress(w.p)
	}
}
