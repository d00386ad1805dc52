//go:build !amd64

package kernels

// detectCPU reports no vector features: other architectures run Generic.
func detectCPU() cpuFeatures { return cpuFeatures{} }

// archSet has nothing to add outside amd64.
func archSet(Level, *kernelSet) {}
