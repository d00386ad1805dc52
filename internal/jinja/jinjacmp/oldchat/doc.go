// Package oldchat is internal/server/chat as it was before Tandem's own
// renderer (github.com/ardanlabs/jinja v1.8.0 with Tandem's tojson and
// strftime_now), copied from the main branch at the commit the renderer
// replaced it, for the benchmark pair in ../bench_test.go only. It is not
// part of the product.
package oldchat
