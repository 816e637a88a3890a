// Command imagebuild builds Weft's images from the current tree without a
// Docker engine or a registry: it compiles the binaries (static, -trimpath,
// as build/Dockerfile does) and assembles each image FROM scratch with
// internal/tools/oci, then writes them as one docker-archive tarball that
// `ctr images import` loads, and a JSON file of their digests.
//
//	go run ./hack/imagebuild --out DIR [--tag dev]
//
// writes DIR/bin/<binary>, DIR/images.tar and DIR/images.json. The same
// binaries always give the same image digests. build/Dockerfile stays the
// release path; hack/imagebuild's tests check that both describe the same
// images (entrypoints, users, files). `make cluster-images` runs it and
// loads the result into the local cluster (docs/cluster.md).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/weftmesh/weft/internal/tools/oci"
)

// Built is the description of one built image in images.json.
type Built struct {
	Name string `json:"name"`
	Ref  string `json:"ref"`
	oci.Digests
}

// Result is images.json.
type Result struct {
	Archive string  `json:"archive"`
	Images  []Built `json:"images"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("imagebuild", flag.ContinueOnError)
	out := fs.String("out", "", "output directory (required)")
	tag := fs.String("tag", "dev", "tag of every image; also the version stamped into the binaries")
	goBin := fs.String("go", "go", "the go command")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return errors.New("usage: imagebuild --out DIR [--tag dev]")
	}
	binDir := filepath.Join(*out, "bin")
	if err := buildBinaries(ctx, *goBin, binDir, *tag); err != nil {
		return err
	}
	base, err := hostBase()
	if err != nil {
		return err
	}
	res, err := writeImages(*out, *tag, binDir, base)
	if err != nil {
		return err
	}
	for _, im := range res.Images {
		fmt.Printf("%-45s %s\n", im.Ref, im.Manifest)
	}
	return nil
}

// packages are the main packages built, in the order of Images.
var packages = []string{"./cmd/weft-controller", "./cmd/weft-proxy", "./cmd/weft-init", "./cmd/weft", "./test/cluster/testapp"}

// buildBinaries compiles every image's binary into dir in one go build.
func buildBinaries(ctx context.Context, goBin, dir, version string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args := []string{"build", "-trimpath", "-tags", "grpcnotrace",
		"-ldflags", "-s -w -X github.com/weftmesh/weft/internal/cli/core.Version=" + version,
		"-o", dir + string(filepath.Separator)}
	cmd := exec.CommandContext(ctx, goBin, append(args, packages...)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	return nil
}

// hostBase reads what the images take from the host: the CA bundle and
// iptables.
func hostBase() (Base, error) {
	ca, err := os.ReadFile(caBundle)
	if err != nil {
		return Base{}, fmt.Errorf("CA certificates (apt-get install ca-certificates): %w", err)
	}
	ipt, err := HostIptables()
	if err != nil {
		return Base{}, err
	}
	return Base{CABundle: ca, Iptables: ipt}, nil
}

// writeImages assembles every image from the binaries in binDir and writes
// out/images.tar and out/images.json.
func writeImages(out, tag, binDir string, base Base) (Result, error) {
	var (
		images []oci.Image
		res    = Result{Archive: filepath.Join(out, "images.tar")}
	)
	for _, im := range Images() {
		bin, err := os.ReadFile(filepath.Join(binDir, im.Binary))
		if err != nil {
			return Result{}, err
		}
		img, built, err := build(im, tag, bin, base)
		if err != nil {
			return Result{}, err
		}
		images = append(images, oci.Image{Ref: built.Ref, Image: img})
		res.Images = append(res.Images, built)
	}
	var buf bytes.Buffer
	if err := oci.WriteArchive(&buf, images); err != nil {
		return Result{}, err
	}
	if err := writeAtomic(res.Archive, buf.Bytes()); err != nil {
		return Result{}, err
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return Result{}, err
	}
	return res, writeAtomic(filepath.Join(out, "images.json"), append(js, '\n'))
}

func build(im Image, tag string, bin []byte, base Base) (v1.Image, Built, error) {
	spec, err := im.Spec(tag, bin, base)
	if err != nil {
		return nil, Built{}, err
	}
	img, err := oci.Build(spec)
	if err != nil {
		return nil, Built{}, err
	}
	d, err := oci.DigestsOf(img)
	if err != nil {
		return nil, Built{}, err
	}
	return img, Built{Name: im.Name, Ref: spec.Ref, Digests: d}, nil
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
