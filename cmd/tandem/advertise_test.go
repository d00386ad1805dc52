package main

import (
	"strings"
	"testing"

	"tandem/internal/pd/room"
)

// TestAdvertiseAddr: a prefill worker's --transfer-advertise given as a
// host alone (the Helm chart's $(POD_IP), IPv4 or IPv6) gets
// --transfer-port joined to it, an IPv6 literal bracketed; host:port is
// kept; a decode worker's name is kept.
func TestAdvertiseAddr(t *testing.T) {
	for _, tc := range []struct {
		role      room.Role
		advertise string
		port      int
		want      string
		wantErr   string
	}{
		{room.RolePrefill, "", 7000, "", ""},
		{room.RolePrefill, "10.0.0.5", 7000, "10.0.0.5:7000", ""},
		{room.RolePrefill, "fd00::5", 7000, "[fd00::5]:7000", ""},
		{room.RolePrefill, "[fd00::5]", 7000, "[fd00::5]:7000", ""},
		{room.RolePrefill, "prefill-0.tandem", 7000, "prefill-0.tandem:7000", ""},
		{room.RolePrefill, "[fd00::5]:7001", 7000, "[fd00::5]:7001", ""},
		{room.RolePrefill, "10.0.0.5:7001", 7000, "10.0.0.5:7001", ""},
		{room.RolePrefill, "fd00::5", 0, "", "no port"},
		{room.RoleDecode, "decode-pod-7", 0, "decode-pod-7", ""},
	} {
		f := &pdFlags{advertise: tc.advertise, transferPort: tc.port}
		got, err := f.advertiseAddr(tc.role)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v %q port %d: %q, %v; want an error with %q", tc.role, tc.advertise, tc.port, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v %q port %d: %q, %v; want %q", tc.role, tc.advertise, tc.port, got, err, tc.want)
		}
	}
}
