package router

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/hex"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"tandem/internal/api/httpx"
	apileg "tandem/internal/api/leg"
	"tandem/internal/api/openai"
	"tandem/internal/pd/debugdoc"
)

// The live dashboard (GET /dashboard): one self-contained page that polls
// GET /dashboard/data. Both sit behind the cluster credential, as /debug/*
// does: a request carries the bearer credential, or the session cookie a
// login (POST /dashboard/login with the cluster token, or the credential's
// hex, in a form field) set. The token never appears in a URL.

//go:embed dashboard/index.html
var dashboardPage []byte

const (
	// sessionCookie is the dashboard session's cookie name.
	sessionCookie = "tandem_dashboard"
	// sessionLifetime is how long a login lasts.
	sessionLifetime = 12 * time.Hour
	// dashboardFailuresMax is how many recent failed rooms the data lists.
	dashboardFailuresMax = 50
	// loginBodyBytesMax bounds the login form.
	loginBodyBytesMax = 4 << 10
)

// sessionMAC is the cookie's MAC over its expiry, keyed by the debug
// credential (so a session dies with a new cluster token).
func (rt *Router) sessionMAC(exp string) string {
	m := hmac.New(sha256.New, []byte(rt.o.LegKeys.Credential()))
	m.Write([]byte("tandem dashboard session v1|" + exp))
	return hex.EncodeToString(m.Sum(nil))
}

// newSession returns a session cookie value valid for sessionLifetime.
func (rt *Router) newSession() string {
	exp := strconv.FormatInt(time.Now().Add(sessionLifetime).Unix(), 10)
	return exp + "." + rt.sessionMAC(exp)
}

// debugAllowed reports whether r may see /debug/* and the dashboard: no
// cluster credential is configured, r carries it, or r has a live session
// cookie.
func (rt *Router) debugAllowed(r *http.Request) bool {
	k := rt.o.LegKeys
	if k == nil || k.CheckCredential(r.Header) {
		return true
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return false
	}
	exp, mac, ok := strings.Cut(c.Value, ".")
	if !ok {
		return false
	}
	sec, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || time.Now().Unix() >= sec {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(mac), []byte(rt.sessionMAC(exp))) == 1
}

// guardDebug is apileg.Guard that also takes the dashboard's session
// cookie, so the dashboard's links to /debug/rooms open in the browser.
func (rt *Router) guardDebug(h http.HandlerFunc) http.HandlerFunc {
	if rt.o.LegKeys == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if !rt.debugAllowed(r) {
			rt.o.LegKeys.RequireCredential(h).ServeHTTP(w, r) // answers the 401
			return
		}
		h(w, r)
	}
}

// serveDashboard answers the page (the page itself shows the login form
// when its data request gets a 401).
func (rt *Router) serveDashboard(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(dashboardPage)
}

// serveDashboardLogin takes the form field "token" (the cluster token, or
// the hex of the debug credential), and on a match sets the session
// cookie (HttpOnly, SameSite=Strict) and redirects to /dashboard.
func (rt *Router) serveDashboardLogin(w http.ResponseWriter, r *http.Request) {
	k := rt.o.LegKeys
	if k == nil {
		http.Redirect(w, r, "/dashboard", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, loginBodyBytesMax)
	if err := r.ParseForm(); err != nil {
		httpx.WriteError(w, openai.Invalid("token", openai.CodeInvalidValue, "The login form could not be read: %v", err))
		return
	}
	tok := strings.TrimSpace(r.PostForm.Get("token"))
	ok := false
	if tok != "" {
		cred := k.Credential()
		if subtle.ConstantTimeCompare([]byte("Bearer "+tok), []byte(cred)) == 1 {
			ok = true
		} else if dk, err := apileg.NewKeys([]byte(tok)); err == nil && subtle.ConstantTimeCompare([]byte(dk.Credential()), []byte(cred)) == 1 {
			ok = true
		}
	}
	if !ok {
		apileg.WriteUnauthorized(w, apileg.Unauthorized("That is not this cluster's token: give $TANDEM_CLUSTER_TOKEN (or the hex of the debug credential)."))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: rt.newSession(), Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(sessionLifetime / time.Second)})
	http.Redirect(w, r, "/dashboard", http.StatusSeeOther)
}

// dashboardData is GET /dashboard/data.
type dashboardData struct {
	Router  string            `json:"router"`
	Workers []debugdoc.Worker `json:"workers"`
	// Live is the live rooms' count, from the same snapshot as Rooms (and
	// as /debug/rooms computes it).
	Live     int                   `json:"live"`
	Rooms    []dashboardRoom       `json:"rooms"`    // live rooms, oldest first
	Failures []dashboardRoom       `json:"failures"` // recent failed rooms, newest first
	ByReason map[string]int        `json:"failures_by_reason"`
	Hists    map[string]dashboardH `json:"histograms"`
}

type dashboardRoom struct {
	ID        string  `json:"id"`
	RequestID string  `json:"request_id"`
	State     string  `json:"state"`
	Phase     string  `json:"phase"`
	Reason    string  `json:"reason,omitempty"`
	Prefill   string  `json:"prefill,omitempty"`
	Decode    string  `json:"decode,omitempty"`
	AgeMS     float64 `json:"age_ms"`
}

// dashboardH is one histogram as cumulative counts at upper bounds.
type dashboardH struct {
	Bounds []float64 `json:"bounds"`
	Counts []uint64  `json:"counts"` // cumulative, one per bound
	Count  uint64    `json:"count"`
	Sum    float64   `json:"sum"`
}

// failureKind is a failed room's reason for grouping: the text before
// the first ": " or " (", or the whole reason.
func failureKind(reason string) string {
	if reason == "" {
		return "unknown"
	}
	if i := strings.Index(reason, " leg to "); i > 0 {
		return reason[:i] + " leg"
	}
	if i := strings.IndexAny(reason, ":("); i > 0 {
		return strings.TrimSpace(reason[:i])
	}
	return reason
}

func (rt *Router) serveDashboardData(w http.ResponseWriter, r *http.Request) {
	doc := rt.roomsDoc()
	d := dashboardData{Router: rt.o.Name, Workers: doc.Workers, Live: doc.Live, ByReason: map[string]int{},
		Hists: map[string]dashboardH{}}
	if d.Workers == nil {
		d.Workers = []debugdoc.Worker{}
	}
	d.Rooms, d.Failures = []dashboardRoom{}, []dashboardRoom{}
	for _, rm := range doc.Rooms {
		dr := dashboardRoom{ID: rm.ID, RequestID: rm.RequestID, State: rm.State, Phase: rm.Phase, Reason: rm.Reason,
			Prefill: rm.Prefill, Decode: rm.Decode, AgeMS: rm.AgeMS}
		switch {
		case !rm.Terminal():
			d.Rooms = append(d.Rooms, dr)
		case rm.State == debugdoc.StateFailed:
			d.Failures = append(d.Failures, dr)
			d.ByReason[failureKind(rm.Reason)]++
		}
	}
	sort.Slice(d.Rooms, func(i, j int) bool { return d.Rooms[i].AgeMS > d.Rooms[j].AgeMS })
	sort.Slice(d.Failures, func(i, j int) bool { return d.Failures[i].AgeMS < d.Failures[j].AgeMS })
	if len(d.Failures) > dashboardFailuresMax {
		d.Failures = d.Failures[:dashboardFailuresMax]
	}
	if mfs, err := rt.reg.Gather(); err == nil {
		for _, mf := range mfs {
			switch mf.GetName() {
			case "vllm:time_to_first_token_seconds":
				d.Hists["ttft"] = mergeHist(mf.GetMetric(), nil)
			case "vllm:inter_token_latency_seconds":
				d.Hists["itl"] = mergeHist(mf.GetMetric(), nil)
			case "tandem_router_ttft_phase_seconds":
				d.Hists["transfer"] = mergeHist(mf.GetMetric(), func(m *dto.Metric) bool {
					for _, l := range m.GetLabel() {
						if l.GetName() == "phase" {
							return l.GetValue() == "transfer"
						}
					}
					return false
				})
			}
		}
	}
	httpx.WriteJSON(w, http.StatusOK, d)
}

// mergeHist adds up the histograms of ms that keep selects (all when nil).
func mergeHist(ms []*dto.Metric, keep func(*dto.Metric) bool) dashboardH {
	var h dashboardH
	for _, m := range ms {
		if keep != nil && !keep(m) || m.GetHistogram() == nil {
			continue
		}
		hg := m.GetHistogram()
		if h.Bounds == nil {
			for _, b := range hg.GetBucket() {
				h.Bounds = append(h.Bounds, b.GetUpperBound())
			}
			h.Counts = make([]uint64, len(h.Bounds))
		}
		for i, b := range hg.GetBucket() {
			if i < len(h.Counts) {
				h.Counts[i] += b.GetCumulativeCount()
			}
		}
		h.Count += hg.GetSampleCount()
		h.Sum += hg.GetSampleSum()
	}
	if h.Bounds == nil {
		h.Bounds, h.Counts = []float64{}, []uint64{}
	}
	return h
}
