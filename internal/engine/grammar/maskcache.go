package grammar

import (
	"encoding/binary"
	"math"
	"slices"
)

// The whole-mask cache. A mask depends only on what its computation read
// of the stacks: the states of each stack's top frames, down to the lowest
// frame a walk popped into (a token of n bytes can close at most a few
// rules per byte), whether stacks share frames there, and the depth limit
// when a push came near it. Keying masks by whole stacks never hit for a
// grammar whose stack keeps growing below the part a token can reach (a
// JSON value deep in an array, or an ambiguous grammar's pending rules);
// keying by that top part does.
//
// So each computation records (trace) the lowest frame depth it read on
// each stack and the deepest frame any walk reached. The key depth K is
// the most frames read on any stack; the key is the stacks cut to their
// top K frames, written as a graph: the union U of every stack's top K
// frames, each stack written from its top down while its frames are in U
// (which may run past K through frames another stack shares), then the
// frame it reached below U, numbered canonically (0 for the bottom). Two
// stack sets with equal keys have the same frames in U, shared the same
// way, over frames below U that no walk reads: their masks are equal,
// except where the depth limit refused a call, which is why such masks are
// not cached, and why an entry records how far above the shallowest stack
// its walks pushed frames (rise): it serves a stack set only when that
// stays under the limit from its deepest stack.
//
// A lookup does not know K: it tries each key depth the cache holds
// (maxKeyDepths at most).

// maxKeyDepths bounds the distinct key depths in one grammar's mask cache;
// a mask whose key depth would be one more is not cached.
const maxKeyDepths = 8

// maskEntry is a cached mask.
type maskEntry struct {
	bits Bitset
	rise int32 // frames pushed above the shallowest stack, at most
}

// keyBuilder is a walker's scratch for mask keys.
type keyBuilder struct {
	buf    []byte
	hc     map[config]int32
	tops   []int32  // top frame of each stack in the walker's arena (several stacks)
	mark   []uint32 // frame in U when equal to stamp
	stamp  uint32
	enc    []int32 // the stacks' encodings, one after another
	items  []keyItem
	bounds []int32 // raw frames below U, in order of first use: canonical id = index+1
	depths []int32 // snapshot of the cache's key depths
}

// keyItem is one stack's encoding: enc[start:end] (states from the top
// down) over frame bound (-1: the bottom).
type keyItem struct {
	start, end int32
	bound      int32
}

// prepare loads several stacks into the walker's arena, frames shared
// where the stacks are equal from the bottom up (one stack needs no
// arena).
func (kb *keyBuilder) prepare(stacks [][]int32, w *walker) {
	if len(stacks) < 2 {
		return
	}
	if kb.hc == nil {
		kb.hc = map[config]int32{}
	}
	w.reset()
	clear(kb.hc)
	w.hc = kb.hc
	kb.tops = kb.tops[:0]
	for _, st := range stacks {
		kb.tops = append(kb.tops, w.load(st))
	}
	w.hc = nil
	if n := len(w.st); len(kb.mark) < n {
		kb.mark = append(kb.mark, make([]uint32, n-len(kb.mark))...)
	}
}

// key returns the key of stacks at depth k (prepare first). The slice is
// reused by the next call.
func (kb *keyBuilder) key(stacks [][]int32, k int32, w *walker) []byte {
	b := binary.LittleEndian.AppendUint32(kb.buf[:0], uint32(k))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(stacks)))
	if len(stacks) == 1 {
		st := stacks[0]
		d := int32(len(st))
		take := min(k, d)
		b = binary.LittleEndian.AppendUint32(b, uint32(take))
		for j := d - 1; j >= d-take; j-- {
			b = binary.LittleEndian.AppendUint32(b, uint32(st[j]))
		}
		bound := uint32(0)
		if d > k {
			bound = 1
		}
		b = binary.LittleEndian.AppendUint32(b, bound)
		kb.buf = b
		return b
	}
	kb.stamp++
	if kb.stamp == 0 { // wrapped: old marks could read as current
		clear(kb.mark)
		kb.stamp = 1
	}
	for _, f := range kb.tops {
		for n := int32(0); n < k && f >= 0; n++ {
			kb.mark[f] = kb.stamp
			f = w.par[f]
		}
	}
	kb.enc, kb.items = kb.enc[:0], kb.items[:0]
	for _, f := range kb.tops {
		start := int32(len(kb.enc))
		for f >= 0 && kb.mark[f] == kb.stamp {
			kb.enc = append(kb.enc, w.st[f])
			f = w.par[f]
		}
		kb.items = append(kb.items, keyItem{start, int32(len(kb.enc)), f})
	}
	enc := kb.enc
	slices.SortFunc(kb.items, func(x, y keyItem) int {
		if c := slices.Compare(enc[x.start:x.end], enc[y.start:y.end]); c != 0 {
			return c
		}
		return int(x.bound - y.bound)
	})
	kb.bounds = kb.bounds[:0]
	for _, it := range kb.items {
		b = binary.LittleEndian.AppendUint32(b, uint32(it.end-it.start))
		for _, s := range enc[it.start:it.end] {
			b = binary.LittleEndian.AppendUint32(b, uint32(s))
		}
		id := 0
		if it.bound >= 0 {
			id = slices.Index(kb.bounds, it.bound) + 1
			if id == 0 {
				kb.bounds = append(kb.bounds, it.bound)
				id = len(kb.bounds)
			}
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(id))
	}
	kb.buf = b
	return b
}

// lookup returns the cached mask of stacks, or nil (counted as a miss
// when countMiss).
func (t *tables) lookup(stacks [][]int32, w *walker, countMiss bool) Bitset {
	kb := &w.kb
	t.mu.Lock()
	kb.depths = append(kb.depths[:0], t.depths...)
	t.mu.Unlock()
	if len(kb.depths) > 0 {
		maxD := int32(0)
		for _, st := range stacks {
			maxD = max(maxD, int32(len(st)))
		}
		kb.prepare(stacks, w)
		for _, k := range kb.depths {
			key := kb.key(stacks, k, w)
			t.mu.Lock()
			e := t.masks[string(key)]
			if e != nil && maxD+e.rise < w.maxDepth {
				t.stats.MaskHits++
				t.mu.Unlock()
				return e.bits
			}
			t.mu.Unlock()
		}
	}
	if countMiss {
		t.mu.Lock()
		t.stats.MaskMisses++
		t.mu.Unlock()
	}
	return nil
}

// store caches mask m of stacks, keyed by what the computation read of
// them (w.tr). A mask the depth limit shaped (w.refused) is not cached.
func (t *tables) store(stacks [][]int32, m Bitset, w *walker) {
	maskMax, _ := t.limits()
	if maskMax < 0 || w.refused {
		return
	}
	k, minD := int32(1), int32(math.MaxInt32)
	for i, st := range stacks {
		d := int32(len(st))
		k = max(k, d-w.tr.low[i]+1)
		minD = min(minD, d)
	}
	rise := max(0, w.tr.reach-minD)
	kb := &w.kb
	kb.prepare(stacks, w)
	key := kb.key(stacks, k, w)
	size := 8*len(m) + len(key) + 64
	if size > maskMax {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !slices.Contains(t.depths, k) {
		if len(t.depths) >= maxKeyDepths {
			return
		}
		t.depths = append(t.depths, k)
	}
	if _, ok := t.masks[string(key)]; ok {
		return
	}
	for t.maskBytes+size > maskMax && len(t.masks) > 0 {
		for old, e := range t.masks { // evict an arbitrary entry
			t.maskBytes -= 8*len(e.bits) + len(old) + 64
			delete(t.masks, old)
			break
		}
	}
	t.masks[string(key)] = &maskEntry{bits: append(Bitset(nil), m...), rise: rise}
	t.maskBytes += size
}
