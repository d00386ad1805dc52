//go:build !amd64

package kernels

// archAttnTiles has no block assembly outside amd64.
func archAttnTiles(Level) *attnTileAsm { return nil }
