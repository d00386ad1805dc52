// Package cluster starts a whole disaggregated deployment on one machine:
// N prefill workers, M decode workers and a router, each its own `tandem`
// process, as `tandem up` does. It waits until every process answers
// /health, and stops them all when asked: the routers first, then every
// worker at once, each with SIGTERM and StopTimeout before SIGKILL.
//
// Processes are children of the caller, each in a process group of its
// own (a terminal's Ctrl-C reaches only the caller); on Linux the kernel
// sends each SIGTERM if the caller dies, even by SIGKILL. Their output
// goes to the given writer, each line prefixed with the process's name.
// Every child gets the same cluster token through its environment, never
// on the command line. With Options.Supervise a child that exits on its
// own is started again on the same address after a backoff (doubling
// from RestartBackoff to RestartBackoffMax, reset after a run of
// StableAfter); exits that Stop or Kill asked for never are.
package cluster
