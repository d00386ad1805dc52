package sim

import (
	"tandem/internal/pd/driver"
	"tandem/internal/pd/room"
)

// itemKind names what a queued item does when its time comes.
type itemKind uint8

const (
	itemDispatch   itemKind = iota + 1 // the router sends both legs of request req
	itemLegArrive                      // a leg's HTTP request reaches its node
	itemLegCancel                      // the router's cancel of a leg reaches its node
	itemLegAnswer                      // a node's answer to a leg reaches the router
	itemStream                         // the decode leg's first bytes reach the router
	itemFrame                          // a control or KV frame reaches node (epoch)
	itemSent                           // a frame handed to the wire is written (node, peer, lane; epoch)
	itemKVDone                         // the receiver finished copying a KV frame into its page (epoch)
	itemTimer                          // node's timer fires (epoch, gen)
	itemWatchdog                       // the periodic watchdog runs on every node
	itemCompute                        // prefill engine: a chunk of a job finished (epoch, gen)
	itemAdmitted                       // decode engine reserved pages: Driver.Admitted (epoch)
	itemGenerated                      // decode engine finished a sequence (epoch)
	itemPeerLost                       // node learns that peer is gone (heartbeats or a closed connection)
	itemCrash                          // node crashes
	itemRestart                        // node restarts with a fresh Machine
	itemPartition                      // frames from node to peer start to be lost
	itemHeal                           // the partition ends
	itemDisconnect                     // request's client goes away
	itemGrace                          // the router stops waiting for a prefill leg after decode answered
	itemPhaseTwo                       // faults stop
)

// item is one scheduled happening. Which fields matter depends on kind.
type item struct {
	at    room.Instant
	seq   uint64
	kind  itemKind
	node  int32 // the node it happens on (or the sending node for partitions)
	peer  int32 // partitions and peer loss: the other node
	epoch uint32
	req   int32 // request index
	leg   int8  // legPrefill or legDecode
	ok    bool  // leg answers: success
	gen   uint64
	note  string        // leg answers: why it failed
	frame *driver.Frame // frames, Sent: the frame on the wire
	from  int32         // frames: the sending node
	nl    *nodeLeg      // engine callbacks: the leg
	pages []int32       // itemAdmitted: the pages reserved
	slot  int32         // itemAdmitted: the state slot reserved (-1: none)
}

// queue is a binary min-heap of items ordered by (at, seq): same-time
// items run in the order they were scheduled, so a run is deterministic.
type queue []item

func (q queue) less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}

func (q *queue) push(it item) {
	*q = append(*q, it)
	h := *q
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func (q *queue) pop() item {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = item{}
	h = h[:last]
	for i := 0; ; {
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
		h[i], h[child] = h[child], h[i]
		i = child
	}
	*q = h
	return top
}
