package router_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	apileg "tandem/internal/api/leg"
	"tandem/internal/pd/debugdoc"
	"tandem/internal/router"
)

// TestDashboardBehindTheCredential: /dashboard/data and /debug/rooms
// refuse a browser without the credential; a login with a wrong token is
// refused and sets nothing; a login with the cluster token sets an
// HttpOnly, SameSite=Strict cookie (the token is in the form body, never
// in a URL) that opens the data and the room history; the data's live
// count is /debug/rooms' for the same room table, with the live room
// listed; a forged cookie opens nothing.
func TestDashboardBehindTheCredential(t *testing.T) {
	const token = "dashboard-test-cluster-token"
	keys, err := apileg.NewKeys([]byte(token))
	if err != nil {
		t.Fatal(err)
	}
	p := newFake(t, "prefill", nil)
	p.gen = func(w http.ResponseWriter, r *http.Request, _ []byte) { p.waitCancel(r) }
	d := newFake(t, "decode", nil)
	d.gen = func(w http.ResponseWriter, r *http.Request, _ []byte) { d.waitCancel(r) }
	c := newCluster(t, []*fake{p}, []*fake{d}, func(o *router.Options) { o.LegKeys = keys; o.LegTimeout = time.Minute })

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := browser.Get(c.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := get("/dashboard"); st != 200 || !strings.Contains(body, `action="/dashboard/login"`) {
		t.Fatalf("GET /dashboard: %d, want 200 and the page with its login form", st)
	}
	for _, path := range []string{"/dashboard/data", "/debug/rooms"} {
		if st, _ := get(path); st != http.StatusUnauthorized {
			t.Errorf("GET %s without a session: %d, want 401", path, st)
		}
	}
	resp, err := browser.PostForm(c.srv.URL+"/dashboard/login", url.Values{"token": {"wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("login with a wrong token: %d, want 401", resp.StatusCode)
	}
	if st, _ := get("/dashboard/data"); st != http.StatusUnauthorized {
		t.Errorf("after a refused login: /dashboard/data %d, want 401", st)
	}
	// A forged cookie (a far expiry with a made-up MAC) opens nothing.
	u, _ := url.Parse(c.srv.URL)
	jar.SetCookies(u, []*http.Cookie{{Name: "tandem_dashboard", Value: "99999999999." + strings.Repeat("ab", 32)}})
	if st, _ := get("/dashboard/data"); st != http.StatusUnauthorized {
		t.Errorf("a forged cookie: /dashboard/data %d, want 401", st)
	}

	noFollow := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = noFollow.PostForm(c.srv.URL+"/dashboard/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard" {
		t.Fatalf("login: %d to %q, want 303 to /dashboard", resp.StatusCode, resp.Header.Get("Location"))
	}
	sc := resp.Header.Get("Set-Cookie")
	if !strings.Contains(sc, "HttpOnly") || !strings.Contains(sc, "SameSite=Strict") || strings.Contains(sc, token) {
		t.Errorf("Set-Cookie %q: want HttpOnly, SameSite=Strict, and not the token", sc)
	}

	// One live room: a request whose legs hang.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", c.srv.URL+"/v1/completions", strings.NewReader(`{"prompt":"x"}`))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	var data struct {
		Live  int `json:"live"`
		Rooms []struct {
			ID string `json:"id"`
		} `json:"rooms"`
		Workers []debugdoc.Worker `json:"workers"`
	}
	waitFor(t, func() bool {
		st, body := get("/dashboard/data")
		if st != 200 {
			t.Fatalf("/dashboard/data with the session: %d %s", st, body)
		}
		if err := json.Unmarshal([]byte(body), &data); err != nil {
			t.Fatal(err)
		}
		return data.Live == 1
	})
	if len(data.Rooms) != 1 || len(data.Workers) != 2 {
		t.Fatalf("data lists %d live rooms and %d workers, want 1 and 2", len(data.Rooms), len(data.Workers))
	}
	st, body := get("/debug/rooms?room=" + data.Rooms[0].ID)
	var doc debugdoc.Rooms
	if st != 200 || json.Unmarshal([]byte(body), &doc) != nil {
		t.Fatalf("/debug/rooms?room= with the session: %d %s", st, body)
	}
	if doc.Live != data.Live || len(doc.Rooms) != 1 || doc.Rooms[0].ID != data.Rooms[0].ID || len(doc.Rooms[0].History) == 0 {
		t.Errorf("/debug/rooms?room=%s: live %d, rooms %+v; want live %d and that room with its history", data.Rooms[0].ID, doc.Live, doc.Rooms, data.Live)
	}
}
