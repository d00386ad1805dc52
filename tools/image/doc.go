// Command image writes Tandem's container image as an OCI image layout,
// without a Docker engine: one layer holding the static tandem binary at
// /usr/local/bin/tandem (the entrypoint), a CA bundle at
// /etc/ssl/certs/ca-certificates.crt for the hub client's HTTPS, an
// /etc/passwd naming the non-root user 65532 the image runs as, and a
// world-writable /tmp. Timestamps are fixed, so the same inputs give the same
// digest. scripts/image.sh builds the binary and runs this; push the layout
// with, for example, `crane push OUT REGISTRY/tandem:TAG`.
//
//	go run . -binary PATH -out DIR [-ca FILE] [-tag NAME:TAG] [-arch amd64]
package main
