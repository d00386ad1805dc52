package modelhub_test

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// newGitHub starts a hub that serves one small file itself (no redirect),
// with its git blob id as the ETag, as the hub does for non-LFS files.
func newGitHub(t *testing.T, content []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	etag := `"` + hex.EncodeToString(h.Sum(nil)) + `"`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", etag)
		w.Write(content)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
