// Package testenv locates the files that tests share with the rest of the
// team (real models, llama.cpp test vectors and reference outputs) and skips
// a test, saying why, when they are absent.
//
// The shared folder is $TANDEM_SHARED when set, else ../shared relative to
// the repository root. Its files are never copied into the repository.
package testenv
