package worker

import (
	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

func kvwireKV(layer uint16, kind kvwire.KVKind, ord uint32) kvwire.KV {
	return kvwire.KV{Layer: layer, Kind: kind, Ordinal: ord}
}
func typeDone() kvwire.Type  { return kvwire.TypeDone }
func typeAbort() kvwire.Type { return kvwire.TypeAbort }
func doneNothing() []byte    { return (&kvwire.Done{PageCount: 1, Bytes: 1}).AppendTo(nil) }
func abortPayload() []byte {
	return (&kvwire.Abort{Reason: room.ReasonPeerAbort, Message: "late"}).AppendTo(nil)
}
