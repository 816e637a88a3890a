package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"

	"github.com/weftmesh/weft/internal/tools/oci"
)

// systemImages builds the sandbox (pause) and CoreDNS images from the
// given static binaries.
func systemImages(bins Binaries) ([]oci.Image, error) {
	var out []oci.Image
	for _, im := range []struct {
		ref, bin, path string
		entry          []string
	}{
		{PauseImage, bins.Pause, "/pause", []string{"/pause"}},
		{CoreDNSImage, bins.CoreDNS, "/coredns", []string{"/coredns"}},
	} {
		data, err := os.ReadFile(im.bin)
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		img, err := oci.Build(oci.Spec{
			Ref: im.ref,
			Files: []oci.File{
				{Path: im.path, Mode: 0o755, Data: data},
				{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
				{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnonroot:x:65532:\n")},
			},
			User:       "65532:65532",
			Entrypoint: im.entry,
		})
		if err != nil {
			return nil, err
		}
		out = append(out, oci.Image{Ref: im.ref, Image: img})
	}
	return out, nil
}

func importSystemImages(ctx context.Context, l Layout, bins Binaries) error {
	images, err := systemImages(bins)
	if err != nil {
		return err
	}
	path := l.path("system-images.tar")
	var buf bytes.Buffer
	if err := oci.WriteArchive(&buf, images); err != nil {
		return err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return err
	}
	return ImportArchive(ctx, l, path)
}

// ImportArchive loads a docker-archive tarball into the node's containerd,
// in the namespace the kubelet uses, unpacked for its snapshotter.
func ImportArchive(ctx context.Context, l Layout, path string) error {
	cmd := exec.CommandContext(ctx, "ctr", "--address", l.ContainerdSocket(), "--namespace", "k8s.io", "images", "import", "--snapshotter", "overlayfs", path)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cluster: ctr images import %s: %w: %s", path, err, out)
	}
	return nil
}
