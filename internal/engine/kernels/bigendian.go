//go:build armbe || arm64be || m68k || mips || mips64 || mips64p32 || ppc || ppc64 || s390 || s390x || shbe || sparc || sparc64

package kernels

// The kernels read tensor bytes in place as little-endian numbers (GGUF is
// little-endian); this line stops a big-endian build with a clear message.
var _ int = "package kernels needs a little-endian CPU"
