// Package bench measures Tandem's engine: prefill and decode speed of one
// sequence on a model, the figures `tandem bench engine` prints.
package bench
