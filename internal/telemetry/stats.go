package telemetry

import (
	"context"
	"log/slog"
	"time"
)

// EngineStats is what a periodic stats line reports: cumulative token
// counters and the engine's current queues and KV use.
type EngineStats struct {
	PromptTokens, GeneratedTokens, PrefixHitTokens uint64
	Running, Waiting                               int
	KVUsage                                        float64 // 0..1
}

// RunStats logs one "engine stats" line every interval until ctx ends, as
// vLLM prints its periodic stats: prompt and generation throughput over
// the interval (tokens/s), running and waiting sequences, KV cache use
// and the prefix cache's hit rate over the interval (percent). interval
// <= 0 returns at once.
func RunStats(ctx context.Context, log *slog.Logger, interval time.Duration, snap func() EngineStats) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	last, lastAt := snap(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur, now := snap(), time.Now()
		log.Info("engine stats", StatsArgs(last, cur, now.Sub(lastAt))...)
		last, lastAt = cur, now
	}
}

// StatsArgs are the attributes of a stats line for the change from prev
// to cur over d.
func StatsArgs(prev, cur EngineStats, d time.Duration) []any {
	sec := d.Seconds()
	rate := func(a, b uint64) float64 {
		if sec <= 0 || b < a {
			return 0
		}
		return round1(float64(b-a) / sec)
	}
	hit := 0.0
	if p := cur.PromptTokens - prev.PromptTokens; cur.PromptTokens >= prev.PromptTokens && p > 0 && cur.PrefixHitTokens >= prev.PrefixHitTokens {
		hit = round1(100 * float64(cur.PrefixHitTokens-prev.PrefixHitTokens) / float64(p))
	}
	return []any{"prompt_tokens_per_s", rate(prev.PromptTokens, cur.PromptTokens),
		"generation_tokens_per_s", rate(prev.GeneratedTokens, cur.GeneratedTokens),
		"running", cur.Running, "waiting", cur.Waiting,
		"kv_cache_usage_pct", round1(100 * cur.KVUsage), "prefix_cache_hit_pct", hit}
}

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }
