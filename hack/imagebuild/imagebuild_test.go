package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/tools/oci"
)

// fakeBase stands in for the host's files: the tests about the image
// layout must not depend on the host's iptables build.
func fakeBase() Base {
	return Base{
		CABundle: []byte("-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n"),
		Iptables: []oci.File{
			{Path: xtables, Mode: 0o755, Data: []byte("ELF iptables")},
			{Path: "/lib/x86_64-linux-gnu/libc.so.6", Mode: 0o755, Data: []byte("ELF libc")},
			{Path: "/usr/sbin/iptables", Link: "xtables-nft-multi"},
			{Path: "/usr/sbin/ip6tables", Link: "xtables-nft-multi"},
		},
	}
}

// writeFakeBinaries writes one small, distinct "binary" per image into dir.
func writeFakeBinaries(t *testing.T, dir, salt string) {
	t.Helper()
	for _, im := range Images() {
		require.NoError(t, os.WriteFile(filepath.Join(dir, im.Binary), []byte("binary of "+im.Name+salt), 0o755))
	}
}

// layerFiles lists the entries of an image's single layer with their
// headers.
func layerFiles(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		out["/"+strings.TrimSuffix(h.Name, "/")] = h
	}
}

func TestSameBinariesGiveTheSameImagesByteForByte(t *testing.T) {
	bins := t.TempDir()
	writeFakeBinaries(t, bins, "")
	a, b := t.TempDir(), t.TempDir()
	ra, err := writeImages(a, "dev", bins, fakeBase())
	require.NoError(t, err)
	rb, err := writeImages(b, "dev", bins, fakeBase())
	require.NoError(t, err)
	for i := range ra.Images {
		assert.Equal(t, ra.Images[i].Digests, rb.Images[i].Digests, ra.Images[i].Name)
	}
	ta, err := os.ReadFile(filepath.Join(a, "images.tar"))
	require.NoError(t, err)
	tb, err := os.ReadFile(filepath.Join(b, "images.tar"))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(ta, tb), "the archives differ")

	// One changed binary changes its image only.
	require.NoError(t, os.WriteFile(filepath.Join(bins, "weft-proxy"), []byte("another proxy"), 0o755))
	rc, err := writeImages(t.TempDir(), "dev", bins, fakeBase())
	require.NoError(t, err)
	for i, im := range rc.Images {
		if im.Name == "weft-proxy" {
			assert.NotEqual(t, ra.Images[i].Manifest, im.Manifest)
		} else {
			assert.Equal(t, ra.Images[i].Manifest, im.Manifest, im.Name)
		}
	}
}

func TestImagesRunAsTheirNonRootUsersWithTheirBinaries(t *testing.T) {
	for _, im := range Images() {
		spec, err := im.Spec("dev", []byte("bin"), fakeBase())
		require.NoError(t, err)
		img, err := oci.Build(spec)
		require.NoError(t, err)
		cf, err := img.ConfigFile()
		require.NoError(t, err)
		assert.Equal(t, im.Entrypoint, cf.Config.Entrypoint, im.Name)
		uid, _, ok := strings.Cut(cf.Config.User, ":")
		require.True(t, ok, "%s: user %q is uid:gid", im.Name, cf.Config.User)
		assert.NotEqual(t, "0", uid, "%s runs as non-root", im.Name)
		files := layerFiles(t, img)
		require.Contains(t, files, im.Path)
		assert.Equal(t, int64(0o755), files[im.Path].Mode, "%s: the binary is executable", im.Name)
		// The user has a passwd entry, as on distroless.
		assert.Contains(t, passwd, ":x:"+uid+":", "%s: passwd names uid %s", im.Name, uid)
		for p, h := range files {
			assert.Equal(t, 0, h.Uid, "%s %s owned by root", im.Name, p)
			assert.True(t, h.ModTime.Equal(epochForTest), "%s %s dated at the epoch", im.Name, p)
		}
		caps := map[string][]int{}
		for p, h := range files {
			if v, ok := h.PAXRecords["SCHILY.xattr.security.capability"]; ok {
				c, eff, err := oci.ParseCapabilityXattr([]byte(v))
				require.NoError(t, err)
				assert.True(t, eff)
				caps[p] = c
			}
		}
		if im.Iptables {
			assert.Equal(t, map[string][]int{im.Path: {oci.CapNetAdmin, oci.CapNetRaw}}, caps, "only weft-init's binary gets capabilities")
		} else {
			assert.Empty(t, caps, "%s: no file capabilities", im.Name)
		}
	}
}

// capNames are the setcap names of the capabilities the images use.
var capNames = map[int]string{oci.CapNetAdmin: "cap_net_admin", oci.CapNetRaw: "cap_net_raw"}

func TestDockerfileAndImagebuildDescribeTheSameImages(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "build", "Dockerfile"))
	require.NoError(t, err)
	defer f.Close()
	stages, err := ParseDockerfile(f)
	require.NoError(t, err)
	for _, im := range Images() {
		if im.Name == "testapp" {
			assert.NotContains(t, stages, im.Name, "the test application is not a release image")
			continue
		}
		st, ok := stages[im.Name]
		require.True(t, ok, "build/Dockerfile has a %s target", im.Name)
		assert.Equal(t, im.Entrypoint, st.Entrypoint, "%s: entrypoint", im.Name)
		assert.Equal(t, im.User, st.User, "%s: user", im.Name)
		assert.Equal(t, []string{im.Path}, st.Copies, "%s: the files copied from the build", im.Name)

		spec, err := im.Spec("dev", []byte("bin"), fakeBase())
		require.NoError(t, err)
		setcap := map[string]string{}
		for _, file := range spec.Files {
			if len(file.Capabilities) > 0 {
				var names []string
				for _, c := range file.Capabilities {
					names = append(names, capNames[c])
				}
				sort.Strings(names)
				setcap[file.Path] = strings.Join(names, ",")
			}
		}
		assert.Equal(t, setcap, st.Setcap, "%s: file capabilities", im.Name)
		if im.Iptables {
			// The Dockerfile installs Debian's iptables; imagebuild takes
			// the same program and names from the host.
			assert.Equal(t, "debian:bookworm-slim", st.From)
			var paths []string
			for _, file := range spec.Files {
				paths = append(paths, file.Path)
			}
			assert.Contains(t, paths, "/usr/sbin/iptables")
			assert.Contains(t, paths, "/usr/sbin/ip6tables")
		} else {
			// distroless/static: passwd, group and CA certificates, which
			// imagebuild writes too.
			assert.Equal(t, "gcr.io/distroless/static-debian12:nonroot", st.From)
			var paths []string
			for _, file := range spec.Files {
				paths = append(paths, file.Path)
			}
			assert.ElementsMatch(t, []string{"/etc/passwd", "/etc/group", caBundle, im.Path}, paths, im.Name)
		}
	}
}

func TestHostIptablesCarriesItsLibrariesWithoutCapabilities(t *testing.T) {
	if _, err := os.Stat(xtables); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s is missing (apt-get install iptables)", xtables)
		}
		t.Skipf("%s is missing (apt-get install iptables)", xtables)
	}
	files, err := HostIptables()
	require.NoError(t, err)
	byPath := map[string]oci.File{}
	for _, f := range files {
		byPath[f.Path] = f
	}
	require.Contains(t, byPath, xtables)
	assert.Empty(t, byPath[xtables].Capabilities, "weft-init passes its capabilities to iptables as ambient ones")
	assert.Contains(t, byPath, "/lib64/ld-linux-x86-64.so.2", "the ELF interpreter")
	for _, lib := range []string{"libxtables.so.12", "libc.so.6", "libnftnl.so.11", "libmnl.so.0"} {
		found := false
		for p := range byPath {
			found = found || strings.HasSuffix(p, "/"+lib)
		}
		assert.True(t, found, "%s is in the image", lib)
	}
	var ext int
	for p := range byPath {
		if strings.HasPrefix(p, xtablesExt+"/") {
			ext++
		}
	}
	assert.Greater(t, ext, 10, "the match and target extensions")
	// REDIRECT, weft-init's target, is a link to the NAT extension on
	// Debian: without the link iptables does not know --to-ports.
	assert.Equal(t, "libxt_NAT.so", byPath[xtablesExt+"/libxt_REDIRECT.so"].Link)
	assert.Contains(t, byPath, xtablesExt+"/libxt_NAT.so")
	for _, l := range iptablesLinks {
		assert.Equal(t, "xtables-nft-multi", byPath["/usr/sbin/"+l].Link, l)
	}
	_, err = oci.LayerTar(files)
	require.NoError(t, err, "the files make one valid layer")
}

func TestParseDockerfileReadsStagesAcrossContinuationsAndComments(t *testing.T) {
	stages, err := ParseDockerfile(strings.NewReader(`# comment
FROM --platform=$BUILDPLATFORM golang:1 AS build
RUN go build \
  # inner comment
  -o /out/ ./cmd/x
FROM scratch AS x
COPY --from=build /out/x /usr/bin/x
RUN setcap cap_net_raw+ep /usr/bin/x /usr/bin/y && true
USER 1:1
ENTRYPOINT ["/usr/bin/x", "run"]
`))
	require.NoError(t, err)
	require.Contains(t, stages, "x")
	x := stages["x"]
	assert.Equal(t, "scratch", x.From)
	assert.Equal(t, []string{"/usr/bin/x"}, x.Copies)
	assert.Equal(t, "1:1", x.User)
	assert.Equal(t, []string{"/usr/bin/x", "run"}, x.Entrypoint)
	assert.Equal(t, map[string]string{"/usr/bin/x": "cap_net_raw", "/usr/bin/y": "cap_net_raw"}, x.Setcap)
	assert.Equal(t, "golang:1", stages["build"].From)

	_, err = ParseDockerfile(strings.NewReader("FROM scratch AS y\nENTRYPOINT /bin/sh -c x\n"))
	assert.ErrorContains(t, err, "exec form")
	_, err = ParseDockerfile(strings.NewReader("FROM scratch\n"))
	assert.ErrorContains(t, err, "no stage name")
}

var epochForTest = time.Unix(0, 0)

// UIDs in the specs are the constants of specs.go.
func TestUsersAreTheDocumentedUIDs(t *testing.T) {
	want := map[string]int{"weft-controller": uidNonroot, "weft-proxy": uidProxy, "weft-init": uidNobody, "weft": uidNonroot, "testapp": uidNonroot}
	for _, im := range Images() {
		assert.Equal(t, fmt.Sprintf("%d:%d", want[im.Name], want[im.Name]), im.User, im.Name)
		assert.Equal(t, strconv.Itoa(want[im.Name]), strings.Split(im.User, ":")[0])
	}
}
