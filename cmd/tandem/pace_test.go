package main

import (
	"testing"
	"time"

	"tandem/internal/engine/cores"
	"tandem/internal/pd/room"
)

// TestDecodePaceFlag: --core-lease-pace gives a decode worker a pace that
// applies only while another worker on the lease wants cores, gives a
// prefill worker none, and rejects values out of range.
func TestDecodePaceFlag(t *testing.T) {
	r, err := cores.Create(2, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d, err := r.Lease(1, cores.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p, err := r.Lease(0, cores.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	for _, bad := range []time.Duration{-time.Millisecond, 2 * time.Second} {
		if _, err := decodePace(d, room.RoleDecode, bad); err == nil {
			t.Errorf("--core-lease-pace %v accepted", bad)
		}
	}
	if f, err := decodePace(p, room.RolePrefill, 80*time.Millisecond); err != nil || f != nil {
		t.Errorf("a prefill worker got a pace (%v, %v), want none", f != nil, err)
	}
	if f, err := decodePace(d, room.RoleDecode, 0); err != nil || f != nil {
		t.Errorf("--core-lease-pace 0 gave a pace (%v, %v), want none", f != nil, err)
	}
	f, err := decodePace(d, room.RoleDecode, 80*time.Millisecond)
	if err != nil || f == nil {
		t.Fatalf("decodePace: %v", err)
	}
	if got := f(); got != 0 {
		t.Errorf("pace %v while the prefill worker is idle, want 0", got)
	}
	end := p.Step(cores.Normal)
	if got := f(); got != 80*time.Millisecond {
		t.Errorf("pace %v while the prefill worker runs a step, want 80ms", got)
	}
	end()
}
