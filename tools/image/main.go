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
