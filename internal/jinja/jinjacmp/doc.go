// Package jinjacmp holds the benchmark pair of Tandem's chat template
// renderer (internal/jinja behind internal/server/chat) against the one it
// replaced (github.com/ardanlabs/jinja v1.8.0 behind the old chat code,
// oldchat). It is a module of its own so that the product's go.mod does
// not carry the old library:
//
//	cd internal/jinja/jinjacmp && go test -bench . -benchmem -count 5
package jinjacmp
