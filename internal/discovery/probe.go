package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// probeBodyMax bounds a /pd/info answer.
const probeBodyMax = 64 << 10

// HTTPProbe returns a ProbeFunc that asks GET base/pd/info through c (the
// router passes a client that adds the cluster credential) and takes the
// "role" of the JSON answer. Anything but a 200 with a role of prefill or
// decode is an error.
func HTTPProbe(c *http.Client) ProbeFunc {
	return func(ctx context.Context, base string) (Role, error) {
		url := base + "/pd/info"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return "", fmt.Errorf("get %s: %w", url, err)
		}
		resp, err := c.Do(req)
		if err != nil {
			return "", fmt.Errorf("get %s: %w", url, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, probeBodyMax+1))
		if err != nil {
			return "", fmt.Errorf("get %s: read answer: %w", url, err)
		}
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("get %s: status %d: %.200s", url, resp.StatusCode, strings.TrimSpace(string(body)))
		}
		if len(body) > probeBodyMax {
			return "", fmt.Errorf("get %s: answer over %d bytes", url, probeBodyMax)
		}
		var info struct {
			Role string `json:"role"`
		}
		if err := json.Unmarshal(body, &info); err != nil {
			return "", fmt.Errorf("get %s: decode answer: %w", url, err)
		}
		role, ok := roleOf(info.Role)
		if !ok {
			return "", fmt.Errorf("get %s: role %q is not prefill or decode", url, info.Role)
		}
		return role, nil
	}
}
