package server

import (
	"context"

	"tandem/internal/engine"
)

// SplitUpdate splits an engine update that carries several tokens into
// one update per token, in order, so that a stream sends one chunk per
// engine step (a decode step yields one token per sequence). The engine's
// Handle merges the updates of every step since the reader's last Next: a
// reader that fell behind (busy cores, a slow write) would otherwise send
// several steps' tokens as one chunk, which hides the inter-token latency
// from clients and benchmarks. The first piece keeps the prompt logprobs
// and the queue time, the last one the end (Done, Finish, Err); every
// piece keeps the prompt and cache counts. An update with at most one
// token is returned as it is.
func SplitUpdate(u engine.Update) []engine.Update {
	if len(u.Tokens) <= 1 {
		return []engine.Update{u}
	}
	out := make([]engine.Update, len(u.Tokens))
	for i, t := range u.Tokens {
		p := engine.Update{Tokens: []engine.Token{t}, PromptTokens: u.PromptTokens, CachedTokens: u.CachedTokens, Preempted: u.Preempted}
		if i == 0 {
			p.PromptLogprobs, p.QueueTime = u.PromptLogprobs, u.QueueTime
		}
		if i == len(u.Tokens)-1 {
			p.Done, p.Finish, p.Err = u.Done, u.Finish, u.Err
		}
		out[i] = p
	}
	return out
}

// stepStream is a Stream that returns one token per Next (SplitUpdate).
type stepStream struct {
	Stream
	rest []engine.Update
}

func (s *stepStream) Next(ctx context.Context) (engine.Update, error) {
	if len(s.rest) > 0 {
		u := s.rest[0]
		s.rest = s.rest[1:]
		return u, nil
	}
	u, err := s.Stream.Next(ctx)
	if err != nil {
		return u, err
	}
	parts := SplitUpdate(u)
	s.rest = parts[1:]
	return parts[0], nil
}
