// Package debugdoc is the one schema of Tandem's room tables: the JSON of
// GET /debug/rooms (on every worker and on the router) and of the router's
// GET /debug/cluster. The worker (package worker) and the router write it;
// `tandem inspect`, the router's fan-out and the e2e tests read it.
//
// The member names are the ones the workers emitted before this package
// existed, so no reader sees a change on the wire. Members only the router
// fills (Rooms.Worker, Rooms.Error, Rooms.Workers, Room.Prefill,
// Room.Decode) are omitted when empty.
package debugdoc
