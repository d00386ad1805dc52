// Package cluster starts a whole disaggregated deployment on one machine:
// N prefill workers, M decode workers and one or more routers, each its
// own `tandem` process, as `tandem up` does. It waits until every process
// answers /ready, and stops them all when asked: the routers first, then
// every worker at once, each drained (SIGTERM, repeated so that its settle
// window ends at once) with StopTimeout before SIGKILL.
//
// The routers share one listening socket, which the cluster opens first
// and holds for its whole life, and pass to each router as fd 3
// (`tandem route --listen-fd 3`): the kernel hands each connection to
// whichever router accepts first, a router that drains stops accepting
// while the others go on, one killed loses only the connections it had
// accepted, and one restarted gets the same socket again; while none
// accepts, connections wait in the socket's queue. Each router also has a
// port of its own (Proc.URL), where it is probed and inspected alone.
//
// Drain stops one process as an orchestrator does during a rolling
// upgrade (one SIGTERM: the whole drain) and reports its exit; Restart
// starts it again on the same address.
//
// Processes are children of the caller, each in a process group of its
// own (a terminal's Ctrl-C reaches only the caller); on Linux the kernel
// sends each SIGTERM if the caller dies, even by SIGKILL. Their output
// goes to the given writer, each line prefixed with the process's name.
// Every child gets the same cluster token through its environment, never
// on the command line. With Options.Supervise a child that exits on its
// own is started again on the same address after a backoff (doubling
// from RestartBackoff to RestartBackoffMax, reset after a run of
// StableAfter); exits that Stop, Drain or Kill asked for never are.
package cluster
