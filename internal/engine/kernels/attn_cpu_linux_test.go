package kernels

// rusageThread is Linux's RUSAGE_THREAD: getrusage for the calling thread.
const rusageThread = 1
