package engine_test

import (
	"fmt"
	"os"
	"testing"

	"tandem/internal/engine/kernels"
)

// TestMain runs the package's tests at the kernel level named by
// TANDEM_KERNEL_LEVEL (generic, avx2 or avx512; unset: the best the CPU
// has), so the llama.cpp equality tests (arch_window_test.go) can be run at every
// level:
//
//	for l in generic avx2 avx512; do TANDEM_KERNEL_LEVEL=$l go test ./internal/engine/; done
func TestMain(m *testing.M) {
	if err := kernels.SetLevelByName(os.Getenv("TANDEM_KERNEL_LEVEL")); err != nil {
		fmt.Fprintf(os.Stderr, "TANDEM_KERNEL_LEVEL: %v\n", err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}
