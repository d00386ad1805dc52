//go:build amd64

package kernels

func init() {
	q8PanelKernel = q8Panel
	q8Packer = packQ8_0PanelAsm
}
