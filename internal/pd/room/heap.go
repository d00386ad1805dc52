package room

// deadlineHeap orders the live rooms by (deadline, seq): the root is the
// room whose deadline comes first, ties broken by age, so Tick fails rooms in
// a deterministic order. Each room knows its index (heapIdx, -1 when out).
type deadlineHeap []*room

func (h deadlineHeap) less(i, j int) bool {
	a, b := h[i], h[j]
	if a.deadline != b.deadline {
		return a.deadline < b.deadline
	}
	return a.seq < b.seq
}

func (h deadlineHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = i
	h[j].heapIdx = j
}

func (h deadlineHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

// down sifts i towards the leaves and reports whether it moved.
func (h deadlineHeap) down(i int) bool {
	start := i
	for {
		child := 2*i + 1
		if child >= len(h) {
			break
		}
		if right := child + 1; right < len(h) && h.less(right, child) {
			child = right
		}
		if !h.less(child, i) {
			break
		}
		h.swap(i, child)
		i = child
	}
	return i > start
}

func (h *deadlineHeap) push(r *room) {
	r.heapIdx = len(*h)
	*h = append(*h, r)
	h.up(r.heapIdx)
}

func (h *deadlineHeap) remove(r *room) {
	i, last := r.heapIdx, len(*h)-1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last] = nil
	*h = (*h)[:last]
	if i != last {
		h.fix(i)
	}
	r.heapIdx = -1
}

// fix restores the order after the deadline of the room at i changed.
func (h deadlineHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}
