//go:build !amd64

package kernels

import "tandem/internal/engine/tensor"

// matvecFormFor returns the many-row matrix-vector kernel for weights of
// type wt at level l; none on this architecture.
func matvecFormFor(l Level, wt tensor.Type) (matvecForm, bool) { return matvecForm{}, false }
