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
//
// # Options and results
//
// In: Options (Binary, Model, Prefill, Decode, Routers, Host, Port,
// WorkerArgs, RouterArgs, Token, Output, LogFormat, Logger, DrainSettle,
// DrainTimeout, StopTimeout, LendCores, OnExit, Supervise and its backoff,
// OnRestart). Out: *Cluster with RouterURL (the shared port), Procs (workers
// first, routers last, each with Name such as prefill-0, router or, with
// several, router-1, Role, URL: its own port), Routers, Drain(name) (one
// SIGTERM, wait for the exit: how long it took and its exit error),
// Kill(name), Restart(ctx, name) and Stop(). OnExit is called once for every
// exit of every child, a restarted one included, with an Exit{Name, Err,
// Requested} (Requested: Stop or Kill asked for it). Child output goes to
// Output one line at a time: with LogFormat "text" (default) each line is
// prefixed [name]; with "json" each line is a JSON object with a "proc" member
// naming the child (a child's JSON object gets the member inserted; any other
// line becomes the "msg" of a new object at level WARN). Helpers for other
// harnesses (the e2e tests): FreePort(host) and WaitReady(ctx, client, base,
// exited), which polls /ready every 100 ms and returns ErrExited when exited
// closes first.
//
// # Invariants
//
//   - Workers start first and must be ready before the routers start; each
//     router gets every worker's URL as --prefill / --decode, the shared
//     socket as fd 3 (--listen-fd 3), a port of its own and --name.
//   - The routers' socket is opened before anything starts and held until Stop
//     ends: no worker's ephemeral port can take it, and while no router
//     accepts (one restarting) connections wait in its queue. The descriptor
//     passed to the children is in blocking mode in this process, because
//     os/exec puts every descriptor it passes into blocking mode and the mode
//     belongs to the socket all routers share (TestSharedSocketStaysBlocking);
//     each router makes it non-blocking when it opens it.
//   - Every child gets the same cluster token through TANDEM_CLUSTER_TOKEN in
//     its environment, never on the command line; with no Token one is made
//     from 32 random bytes (hex).
//   - On any start error, what was started is stopped. Stop sends SIGTERM to
//     the routers, then to every worker at once, repeating it every 100 ms (a
//     child's second signal ends its drain's settle window: nobody is left to
//     notice, TestStopHurriesTheSettle), waits up to StopTimeout (default:
//     settle + drain timeout + 10 s) for each, SIGKILLs what is left, and
//     waits for every output copier. Drain(name) sends one SIGTERM (the whole
//     drain) and waits up to StopTimeout; supervision does not restart what
//     Drain stopped (TestRoutersShareOnePort).
//   - Children lead process groups of their own and, on Linux, are started
//     from one thread locked for the life of the process with PR_SET_PDEATHSIG
//     = SIGTERM, so they drain and exit when the parent dies, SIGKILL included
//     (TestParentDeathStopsChildren, TestChildrenHaveOwnProcessGroup).
//   - With Supervise, an exit nobody asked for is followed by a restart after
//     a backoff (500ms doubling to 30s, reset after a minute-long run),
//     reported through OnRestart and Proc.Restarts; Stop ends pending restarts
//     and none starts after it (TestSuperviseRestarts).
//   - Restart refuses a process that is still running; it reuses the same
//     address and flags.
//   - With LendCores Start creates a core lease region (internal/engine/cores,
//     a memfd for runtime.NumCPU() cores, one slot per worker, at most 8
//     workers) and passes it to every worker, restarted ones included, as fd 3
//     with --core-lease fd:3 --core-lease-slot i (prefill workers first); the
//     router gets none. Stop closes it.
//
// # Limits
//
// workersMax = 64 workers in all, at least one prefill and one decode.
// healthTimeout = 3 minutes per start; /ready is polled every 100 ms
// (healthPoll) with a 2 s client timeout (healthRequestTimeout). Output lines
// up to 1 MiB (lineMax); after a longer one the rest of that child's output is
// drained and discarded, with a warning. Ports come from the kernel
// (FreePort); another process can take one before the child binds it, and
// Start then reports the failure. A router port given (Port) is held by Start
// while the workers start (a worker's ephemeral transfer listener was once
// handed the port the e2e harness had picked for the router) for the cluster's
// whole life; one already taken fails Start at once, naming it
// (TestRouterPort). Each router's own port is held the same way until the
// routers start. At most 16 routers.
package cluster
