package telemetry

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Log formats and levels of --log-format and --log-level.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// ParseLevel reads a --log-level: debug, info, warn (warning) or error.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("--log-level %q is not supported: use debug, info, warn or error", s)
}

// NewLogger returns a logger writing format (text or json) lines of level
// and above to w.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	lv, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case FormatText, "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case FormatJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q is not supported: use text or json", format)
}
