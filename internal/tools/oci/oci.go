// Package oci assembles container images FROM scratch out of files, with no
// Docker engine and no registry: one layer holding the given files, a
// config naming the user and entrypoint, written as a docker-archive
// tarball that `ctr images import` (or `docker load`) reads.
//
// Images are reproducible: the same files and spec give the same layer,
// config and manifest digests (every timestamp is the Unix epoch, owners
// are root, entries are sorted, directories are implied by the files).
//
// It is a tool of Weft's build and test machinery (hack/imagebuild, the
// local cluster), never linked by the mesh libraries.
package oci

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// File is one file of an image.
type File struct {
	// Path is absolute inside the image ("/usr/bin/weft").
	Path string
	// Mode holds the permission bits (0o755 for programs).
	Mode os.FileMode
	// Data is the content of a regular file.
	Data []byte
	// Link, when set, makes the entry a symbolic link to Link (Data is
	// then ignored).
	Link string
	// Capabilities are Linux file capabilities (CAP_* numbers) granted as
	// permitted and effective when the file is executed, stored as the
	// security.capability extended attribute (what `setcap
	// cap_net_admin,cap_net_raw+ep` writes).
	Capabilities []int
}

// Linux capability numbers used by Weft's images.
const (
	CapNetAdmin = 12
	CapNetRaw   = 13
)

// Spec describes an image.
type Spec struct {
	// Ref is the name:tag the archive records ("ghcr.io/weftmesh/weft:dev").
	Ref string
	// Files are the image's only content.
	Files []File
	// User is "uid:gid".
	User       string
	Entrypoint []string
	Cmd        []string
	// Env holds KEY=VALUE pairs.
	Env []string
	// Architecture and OS default to amd64 and linux.
	Architecture, OS string
}

// epoch is the time of every entry and of the config: a fixed value makes
// the digests a function of the content only.
var epoch = time.Unix(0, 0).UTC()

// Build assembles the image of s.
func Build(s Spec) (v1.Image, error) {
	if _, err := name.NewTag(s.Ref, name.StrictValidation); err != nil {
		return nil, fmt.Errorf("oci: image %q: %w", s.Ref, err)
	}
	layerTar, err := LayerTar(s.Files)
	if err != nil {
		return nil, fmt.Errorf("oci: image %s: %w", s.Ref, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("oci: image %s: layer: %w", s.Ref, err)
	}
	arch, osName := s.Architecture, s.OS
	if arch == "" {
		arch = "amd64"
	}
	if osName == "" {
		osName = "linux"
	}
	cfg := &v1.ConfigFile{
		Architecture: arch,
		OS:           osName,
		Created:      v1.Time{Time: epoch},
		Config: v1.Config{
			User:       s.User,
			Entrypoint: s.Entrypoint,
			Cmd:        s.Cmd,
			Env:        s.Env,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return nil, fmt.Errorf("oci: image %s: config: %w", s.Ref, err)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "weft oci.Build", Comment: "files of " + s.Ref},
	})
	if err != nil {
		return nil, fmt.Errorf("oci: image %s: append layer: %w", s.Ref, err)
	}
	return img, nil
}

// LayerTar returns the uncompressed tar of files: parent directories first
// (mode 0755), then every entry sorted by path, owned by root, dated at
// the epoch.
func LayerTar(files []File) ([]byte, error) {
	entries := map[string]File{}
	dirs := map[string]bool{}
	for _, f := range files {
		p := path.Clean(f.Path)
		if !path.IsAbs(f.Path) || p == "/" {
			return nil, fmt.Errorf("file path %q is not an absolute file path", f.Path)
		}
		if _, dup := entries[p]; dup {
			return nil, fmt.Errorf("file %s given twice", p)
		}
		f.Path = p
		entries[p] = f
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		if _, isFile := entries[d]; isFile {
			return nil, fmt.Errorf("%s is both a file and a directory", d)
		}
	}
	names := make([]string, 0, len(entries)+len(dirs))
	for p := range entries {
		names = append(names, p)
	}
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range names {
		rel := strings.TrimPrefix(p, "/")
		hdr := &tar.Header{Name: rel, ModTime: epoch, Uname: "root", Gname: "root", Format: tar.FormatPAX}
		f, isFile := entries[p]
		switch {
		case !isFile:
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, rel+"/", 0o755
		case f.Link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, f.Link, 0o777
		default:
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, int64(f.Mode.Perm()), int64(len(f.Data))
		}
		if len(f.Capabilities) > 0 {
			if !isFile || f.Link != "" {
				return nil, fmt.Errorf("%s: capabilities need a regular file", p)
			}
			xattr, err := capabilityXattr(f.Capabilities)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			hdr.PAXRecords = map[string]string{"SCHILY.xattr.security.capability": string(xattr)}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// capabilityXattr encodes caps as a struct vfs_cap_data of revision 2
// (<linux/capability.h>): magic and flags, then permitted and inheritable
// words for capabilities 0-31 and 32-63. The effective flag makes the
// permitted set effective at exec, as "+ep" does.
func capabilityXattr(caps []int) ([]byte, error) {
	const (
		revision2 = 0x02000000
		effective = 0x000001
	)
	var permitted [2]uint32
	for _, c := range caps {
		if c < 0 || c > 63 {
			return nil, fmt.Errorf("capability %d out of range", c)
		}
		permitted[c/32] |= 1 << (c % 32)
	}
	out := make([]byte, 20)
	binary.LittleEndian.PutUint32(out[0:], revision2|effective)
	binary.LittleEndian.PutUint32(out[4:], permitted[0])
	binary.LittleEndian.PutUint32(out[12:], permitted[1])
	return out, nil
}

// ParseCapabilityXattr decodes a security.capability value written by
// LayerTar (or setcap) into its permitted capability numbers and whether
// they are effective at exec.
func ParseCapabilityXattr(b []byte) (caps []int, effective bool, err error) {
	if len(b) != 20 && len(b) != 24 {
		return nil, false, fmt.Errorf("oci: security.capability of %d bytes", len(b))
	}
	magic := binary.LittleEndian.Uint32(b[0:])
	if rev := magic &^ 0x1; rev != 0x02000000 && rev != 0x03000000 {
		return nil, false, fmt.Errorf("oci: security.capability revision %#x", rev)
	}
	words := [2]uint32{binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[12:])}
	for c := range 64 {
		if words[c/32]&(1<<(c%32)) != 0 {
			caps = append(caps, c)
		}
	}
	return caps, magic&0x1 != 0, nil
}

// Image is a built image and the reference it is saved under.
type Image struct {
	Ref   string
	Image v1.Image
}

// WriteArchive writes images as one docker-archive tarball (what `docker
// save` writes), the form `ctr images import` and `docker load` read. The
// archive is byte-for-byte reproducible: images in the order given (one
// entry per reference), each config then its layers (a layer shared with an
// earlier image is written once), manifest.json last, every entry with the
// zero time. go-containerregistry's tarball.MultiRefWrite walks a map, so
// its entry order changes from run to run.
func WriteArchive(w io.Writer, images []Image) error {
	if len(images) == 0 {
		return errors.New("oci: no image to write")
	}
	type entry struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	tw := tar.NewWriter(w)
	put := func(name string, data []byte) error {
		h := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	seen := map[string]bool{}
	manifest := make([]entry, 0, len(images))
	for _, im := range images {
		tag, err := name.NewTag(im.Ref, name.StrictValidation)
		if err != nil {
			return fmt.Errorf("oci: image %q: %w", im.Ref, err)
		}
		cfgName, err := im.Image.ConfigName()
		if err != nil {
			return fmt.Errorf("oci: image %q: config digest: %w", im.Ref, err)
		}
		cfg, err := im.Image.RawConfigFile()
		if err != nil {
			return fmt.Errorf("oci: image %q: config: %w", im.Ref, err)
		}
		e := entry{Config: cfgName.String(), RepoTags: []string{tag.String()}}
		if !seen[e.Config] {
			seen[e.Config] = true
			if err := put(e.Config, cfg); err != nil {
				return fmt.Errorf("oci: write archive: %w", err)
			}
		}
		layers, err := im.Image.Layers()
		if err != nil {
			return fmt.Errorf("oci: image %q: layers: %w", im.Ref, err)
		}
		for _, l := range layers {
			d, err := l.Digest()
			if err != nil {
				return fmt.Errorf("oci: image %q: layer digest: %w", im.Ref, err)
			}
			file := d.Hex + ".tar.gz"
			if mt, err := l.MediaType(); err == nil && strings.Contains(string(mt), "zstd") {
				file = d.Hex + ".tar.zst"
			}
			e.Layers = append(e.Layers, file)
			if seen[file] {
				continue
			}
			seen[file] = true
			rc, err := l.Compressed()
			if err != nil {
				return fmt.Errorf("oci: image %q: layer %s: %w", im.Ref, d, err)
			}
			data, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				return fmt.Errorf("oci: image %q: layer %s: %w", im.Ref, d, err)
			}
			if err := put(file, data); err != nil {
				return fmt.Errorf("oci: write archive: %w", err)
			}
		}
		manifest = append(manifest, e)
	}
	m, err := json.Marshal(manifest)
	if err != nil {
		return fmt.Errorf("oci: manifest.json: %w", err)
	}
	if err := put("manifest.json", m); err != nil {
		return fmt.Errorf("oci: write archive: %w", err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("oci: write archive: %w", err)
	}
	return nil
}

// Digests are the identifiers of a built image: the manifest digest (what
// a registry would serve) and the config digest (the image ID containerd
// and the kubelet report for a container).
type Digests struct {
	Manifest string `json:"manifest"`
	Config   string `json:"config"`
}

// DigestsOf computes img's digests.
func DigestsOf(img v1.Image) (Digests, error) {
	m, err := img.Digest()
	if err != nil {
		return Digests{}, fmt.Errorf("oci: manifest digest: %w", err)
	}
	c, err := img.ConfigName()
	if err != nil {
		return Digests{}, fmt.Errorf("oci: config digest: %w", err)
	}
	return Digests{Manifest: m.String(), Config: c.String()}, nil
}
