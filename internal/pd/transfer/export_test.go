package transfer

import "tandem/internal/pd/kvwire"

// SetShmHooks installs the shared-memory test hooks (nil for none) and
// returns a function that removes them. Tests that use it must not run
// in parallel with other transfer tests.
func SetShmHooks(offer func(*kvwire.ShmOffer), frame func(*kvwire.KVShm)) func() {
	shmOfferHook, shmFrameHook = offer, frame
	return func() { shmOfferHook, shmFrameHook = nil, nil }
}

// SetSrcHooks installs the source-region test hooks (nil for none) and
// returns a function that removes them, as SetShmHooks.
func SetSrcHooks(source func(*kvwire.ShmSource), frame func(*kvwire.KVSrc)) func() {
	shmSourceHook, srcFrameHook = source, frame
	return func() { shmSourceHook, srcFrameHook = nil, nil }
}

// Batching of KV_SHM frames and collection of KV_SRC releases, for tests.
const (
	ShmBatchFrames   = shmBatchFrames
	ShmFlushDelay    = shmFlushDelay
	HoldCollectDelay = holdCollectDelay
)
