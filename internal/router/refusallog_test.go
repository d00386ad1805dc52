package router_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tandem/internal/router"
)

// TestRefusalLogBounded is finding 9 of the 2026-12-03 red-team run: 200
// unauthenticated requests with a 60 000-byte path added 12 MB to the
// router's log. Now each 401 line carries a bounded prefix of the path,
// at most a few lines are written per interval, and the next line written
// counts those held back.
func TestRefusalLogBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logBuffer
		rt, err := router.New(router.Options{Prefill: []string{"http://127.0.0.1:1"}, Decode: []string{"http://127.0.0.1:2"},
			Logger: slog.New(slog.NewTextHandler(&logs, nil)), Registry: prometheus.NewRegistry(), APIKey: "sekrit"})
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		path := "/v1/completions/" + strings.Repeat("A", 60000)
		send := func() {
			rec := httptest.NewRecorder()
			rt.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader("{}")))
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("no key: %d, want 401", rec.Code)
			}
		}
		for range 200 {
			send()
		}
		lines := strings.Count(logs.String(), "request refused")
		if n := len(logs.String()); n > 16<<10 || lines > 10 || lines == 0 {
			t.Fatalf("200 refusals wrote %d bytes in %d lines; want at most 10 lines and 16 KiB", n, lines)
		}
		time.Sleep(time.Minute)
		send()
		last := logs.String()[strings.LastIndex(strings.TrimSuffix(logs.String(), "\n"), "\n")+1:]
		if !strings.Contains(last, "suppressed=") || !strings.Contains(last, "path_bytes=60016") {
			t.Errorf("the first refusal logged after the interval: %q; want the count of those held back and the path's length", last)
		}
	})
}
