package room

import "testing"

// BenchmarkHappyPath runs one room through the whole happy path per
// iteration on each role (events, Ready and Advance), with tombstones
// evicted at the limit as in a long-running worker.
func BenchmarkHappyPath(b *testing.B) {
	for _, role := range Roles() {
		b.Run(role.String(), func(b *testing.B) {
			cfg := defaultConfig(role)
			cfg.RoomsMax, cfg.TombstonesMax = 1024, 4096
			m, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			now := Instant(0)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				for _, ev := range succeedPath(role, scenarioID(uint64(i+1))) {
					now += 1000
					m.Step(now, ev)
				}
				m.Advance()
			}
		})
	}
}
