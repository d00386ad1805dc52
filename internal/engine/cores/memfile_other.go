//go:build !linux

package cores

import "os"

// memFile returns a new file with no name in the file system (created in
// the temporary directory and unlinked at once), where memfd_create is
// not available.
func memFile(name string) (*os.File, error) {
	f, err := os.CreateTemp("", name+"-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
