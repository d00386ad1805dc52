// Package cluster starts a whole disaggregated deployment on one machine:
// N prefill workers, M decode workers and a router, each its own `tandem`
// process, as `tandem up` does. It waits until every process answers
// /health, and stops them all (router first) when asked.
//
// Processes are children of the caller; their output goes to the given
// writer, each line prefixed with the process's name. Every child gets the
// same cluster token through its environment, never on the command line.
package cluster
