package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"tandem/internal/api/leg"
	"tandem/internal/pd/debugdoc"
	"tandem/internal/testenv"
)

// debugGet fetches a /debug/* document with the cluster credential of
// e2eClusterToken (every cluster these tests start has that token).
func debugGet(ctx context.Context, c *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	keys, err := leg.NewKeys([]byte(e2eClusterToken))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", keys.Credential())
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get %s: %s: %s", url, resp.Status, b)
	}
	return b, nil
}

// roomTable reads base's /debug/rooms (a worker's or the router's).
func roomTable(ctx context.Context, c *http.Client, base string) (debugdoc.Rooms, error) {
	var p debugdoc.Rooms
	b, err := debugGet(ctx, c, base+"/debug/rooms")
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("decode %s/debug/rooms: %w", base, err)
	}
	return p, nil
}

// waitFor polls cond every few milliseconds until it holds, failing the
// test after healthTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, healthTimeout, what, cond)
}
