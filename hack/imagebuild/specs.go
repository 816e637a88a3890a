package main

import (
	"fmt"

	"github.com/weftmesh/weft/internal/tools/oci"
)

// Users of the images. The passwd and group files of every image name
// them, as distroless/static's do for nonroot and nobody.
const (
	uidNonroot = 65532 // the control plane and the CLI (distroless "nonroot")
	uidProxy   = 2102  // weft-proxy: the UID weft-init exempts from redirection
	uidNobody  = 65534 // weft-init: non-root, with NET_ADMIN and NET_RAW through file capabilities
)

const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"weft-proxy:x:2102:2102:weft-proxy:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"
	group = "root:x:0:\nweft-proxy:x:2102:\nnonroot:x:65532:\nnogroup:x:65534:\n"
)

// pathEnv is the PATH of every image: weft-init finds iptables on it.
const pathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// caBundle is where Debian (and distroless) keep the CA certificates.
const caBundle = "/etc/ssl/certs/ca-certificates.crt"

// Image is one image the tool builds: its short name, the Weft binary it
// carries and where, its user and entrypoint.
type Image struct {
	Name       string
	Repo       string
	Binary     string // the binary's name in the build output (cmd/<Binary>)
	Path       string // where the binary goes in the image
	User       string
	Entrypoint []string
	// Iptables adds the host's iptables (nft backend), for weft-init.
	Iptables bool
	// Capabilities are file capabilities of the binary (weft-init's
	// NET_ADMIN and NET_RAW: it runs non-root and passes them to iptables
	// as ambient capabilities, as build/Dockerfile's setcap does).
	Capabilities []int
}

// Images are the release images (build/Dockerfile's targets) and the test
// application. Keep them in step with build/Dockerfile; a test compares.
func Images() []Image {
	return []Image{
		{Name: "weft-controller", Repo: "ghcr.io/weftmesh/weft-controller", Binary: "weft-controller", Path: "/usr/bin/weft-controller",
			User: fmt.Sprintf("%d:%d", uidNonroot, uidNonroot), Entrypoint: []string{"/usr/bin/weft-controller"}},
		{Name: "weft-proxy", Repo: "ghcr.io/weftmesh/weft-proxy", Binary: "weft-proxy", Path: "/usr/lib/weft/weft-proxy",
			User: fmt.Sprintf("%d:%d", uidProxy, uidProxy), Entrypoint: []string{"/usr/lib/weft/weft-proxy", "run"}},
		{Name: "weft-init", Repo: "ghcr.io/weftmesh/weft-init", Binary: "weft-init", Path: "/usr/lib/weft/weft-init",
			User: fmt.Sprintf("%d:%d", uidNobody, uidNobody), Entrypoint: []string{"/usr/lib/weft/weft-init"}, Iptables: true,
			Capabilities: []int{oci.CapNetAdmin, oci.CapNetRaw}},
		{Name: "weft", Repo: "ghcr.io/weftmesh/weft", Binary: "weft", Path: "/usr/bin/weft",
			User: fmt.Sprintf("%d:%d", uidNonroot, uidNonroot), Entrypoint: []string{"/usr/bin/weft"}},
		{Name: "testapp", Repo: "weft.local/testapp", Binary: "testapp", Path: "/usr/bin/testapp",
			User: fmt.Sprintf("%d:%d", uidNonroot, uidNonroot), Entrypoint: []string{"/usr/bin/testapp"}},
	}
}

// Base is what every image holds besides its binary.
type Base struct {
	// CABundle is the PEM CA bundle (empty: none).
	CABundle []byte
	// Iptables are the iptables program files for weft-init (see
	// HostIptables).
	Iptables []oci.File
}

// Spec returns the oci.Spec of im tagged tag, with binary as its program.
func (im Image) Spec(tag string, binary []byte, base Base) (oci.Spec, error) {
	files := []oci.File{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte(passwd)},
		{Path: "/etc/group", Mode: 0o644, Data: []byte(group)},
		{Path: im.Path, Mode: 0o755, Data: binary, Capabilities: im.Capabilities},
	}
	if len(base.CABundle) > 0 {
		files = append(files, oci.File{Path: caBundle, Mode: 0o644, Data: base.CABundle})
	}
	if im.Iptables {
		if len(base.Iptables) == 0 {
			return oci.Spec{}, fmt.Errorf("imagebuild: %s needs the iptables files", im.Name)
		}
		files = append(files, base.Iptables...)
	}
	return oci.Spec{
		Ref:        im.Repo + ":" + tag,
		Files:      files,
		User:       im.User,
		Entrypoint: im.Entrypoint,
		Env:        []string{pathEnv},
	}, nil
}

// xtables is the multi-call program behind iptables' nft backend on
// Debian, and the directory of its match and target extensions.
const (
	xtables    = "/usr/sbin/xtables-nft-multi"
	xtablesExt = "/usr/lib/x86_64-linux-gnu/xtables"
)

// iptablesLinks are the names weft-init (and a person debugging) call;
// each is a link to the multi-call program, which dispatches on its name.
var iptablesLinks = []string{
	"iptables", "iptables-save", "iptables-restore",
	"ip6tables", "ip6tables-save", "ip6tables-restore",
	"iptables-nft", "iptables-nft-save", "iptables-nft-restore",
	"ip6tables-nft", "ip6tables-nft-save", "ip6tables-nft-restore",
}

// HostIptables assembles the iptables files of weft-init's image from the
// host's Debian iptables package: the nft multi-call program (no file
// capabilities: weft-init hands it NET_ADMIN and NET_RAW as ambient ones),
// its extensions, the shared libraries they need and the names that link
// to it.
func HostIptables() ([]oci.File, error) {
	ext, extLinks, err := oci.HostDir(xtablesExt)
	if err != nil {
		return nil, fmt.Errorf("imagebuild: iptables extensions (apt-get install iptables): %w", err)
	}
	files, err := oci.HostProgram(xtables, ext...)
	if err != nil {
		return nil, fmt.Errorf("imagebuild: iptables (apt-get install iptables): %w", err)
	}
	files = append(files, extLinks...)
	for _, l := range iptablesLinks {
		files = append(files, oci.File{Path: "/usr/sbin/" + l, Link: "xtables-nft-multi"})
	}
	return files, nil
}
