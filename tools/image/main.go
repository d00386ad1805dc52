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

import (
	"flag"
	"fmt"
	"os"
	"runtime"
)

func main() {
	var o Options
	flag.StringVar(&o.Binary, "binary", "", "the static tandem binary (CGO_ENABLED=0) to put in the image")
	flag.StringVar(&o.Out, "out", "", "folder to write the OCI image layout to (replaced if it holds a layout)")
	flag.StringVar(&o.CABundle, "ca", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of CA certificates to put in the image (empty: none)")
	flag.StringVar(&o.RefName, "tag", "tandem:dev", "the image's name in the layout (org.opencontainers.image.ref.name)")
	flag.StringVar(&o.Arch, "arch", runtime.GOARCH, "architecture the binary is built for")
	flag.StringVar(&o.Version, "version", "", "version label of the image (org.opencontainers.image.version)")
	flag.Parse()
	if o.Binary == "" || o.Out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: image -binary PATH -out DIR [-ca FILE] [-tag NAME:TAG] [-arch ARCH] [-version V]")
		os.Exit(2)
	}
	d, err := Build(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("%s %s\n", o.Out, d)
}
