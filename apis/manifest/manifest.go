package manifest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// MaxDocumentBytes is the largest single YAML or JSON document the
	// decoder reads; a larger one is an error. Kubernetes itself refuses
	// objects much smaller than this.
	MaxDocumentBytes = 8 << 20
	// MaxFileBytes is the largest file DecodeFile and LoadPaths read.
	MaxFileBytes = 64 << 20
	// maxErrors bounds the problems reported by one call; the rest are
	// counted.
	maxErrors = 100
)

// Object is one decoded object and where it came from.
type Object struct {
	// Source is the file path, or the name given to Decode.
	Source string
	// Document is the 1-based index of the document in the source.
	Document int
	// Item is the 1-based index of the object in a List document, or 0.
	Item int
	// Object is the typed object, such as *v1beta3.Server or *corev1.Pod,
	// with its apiVersion and kind set.
	Object runtime.Object
}

// GroupVersionKind returns the object's apiVersion and kind.
func (o Object) GroupVersionKind() schema.GroupVersionKind {
	return o.Object.GetObjectKind().GroupVersionKind()
}

// String names the object and where it came from, such as
// "web.yaml document 2: Server my-app/web-http".
func (o Object) String() string {
	where := fmt.Sprintf("%s document %d", o.Source, o.Document)
	if o.Item > 0 {
		where += fmt.Sprintf(" item %d", o.Item)
	}
	name := ""
	if m, err := meta.Accessor(o.Object); err == nil {
		name = m.GetName()
		if ns := m.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
	}
	return where + ": " + o.GroupVersionKind().Kind + " " + name
}

// Decode reads a stream of YAML documents (separated by "---" lines) or of
// JSON values, and returns one typed object per non-empty document, in
// order. A v1 List or a typed list (ServerList, PodList, ...) yields its
// items. name is used in errors and in Object.Source.
//
// Decoding is strict: an unknown field, a duplicate field, a value of the
// wrong type, a missing apiVersion, kind or metadata.name, an unknown kind
// or apiVersion, a document over MaxDocumentBytes, or (for the Linkerd
// kinds) a value their CRD schema forbids is an error. Every document is
// checked; on any error Decode returns no objects and all the problems
// joined (each one an *Error). Empty and comment-only documents are
// skipped.
//
// Linkerd objects get the defaults of their CRD schema filled in, as the
// API server would (a Server without accessPolicy reads as "deny"); core
// and Gateway API objects are returned as written.
func Decode(name string, data []byte) ([]Object, error) {
	d := newDecoder()
	d.source(name, data)
	return d.result()
}

// DecodeFile reads and decodes one file; see Decode. The file must be a
// regular file of at most MaxFileBytes.
func DecodeFile(path string) ([]Object, error) {
	d := newDecoder()
	if err := d.file(path); err != nil {
		return nil, err
	}
	return d.result()
}

// LoadPaths decodes every manifest under the given paths. A path may be a
// file (read whatever its extension) or a directory, walked recursively for
// files ending in .yaml, .yml or .json, in lexical order; entries whose
// names start with "." (such as .git) are skipped, and symbolic links to
// directories are not followed. A file reached twice is read once. Objects
// come back in the order of the paths, then of the files. On any error no
// objects are returned; see Decode.
func LoadPaths(paths ...string) ([]Object, error) {
	if len(paths) == 0 {
		return nil, errors.New("manifest: no paths given")
	}
	d := newDecoder()
	seen := map[string]bool{}
	var errs []error
	for _, p := range paths {
		files, err := listFiles(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range files {
			key := f
			if abs, err := filepath.Abs(f); err == nil {
				key = abs
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			if err := d.file(f); err != nil {
				errs = append(errs, err)
			}
		}
	}
	objs, err := d.result()
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return objs, nil
}

// file reads one file into the decoder. Problems with the file itself are
// returned; problems with its content are recorded in d.
func (d *decoder) file(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("manifest: %s: not a regular file", path)
	}
	if info.Size() > MaxFileBytes {
		return fmt.Errorf("manifest: %s: file is %d bytes, over the limit of %d bytes", path, info.Size(), MaxFileBytes)
	}
	// The size can change between Stat and Read; read at most one byte
	// more than allowed to notice.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return fmt.Errorf("manifest: %s: %w", path, err)
	}
	if len(data) > MaxFileBytes {
		return fmt.Errorf("manifest: %s: file is over the limit of %d bytes", path, MaxFileBytes)
	}
	d.source(path, data)
	return nil
}

// listFiles returns the manifest files a path stands for.
func listFiles(root string) ([]string, error) {
	info, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if !info.IsDir() {
		return []string{root}, nil
	}
	var files []string
	err = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root && strings.HasPrefix(e.Name(), ".") {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if e.IsDir() || !isManifestName(e.Name()) {
			return nil
		}
		if e.Type()&fs.ModeSymlink != 0 {
			// Follow links to files, not to directories.
			target, err := os.Stat(p)
			if err != nil {
				return err
			}
			if !target.Mode().IsRegular() {
				return nil
			}
		} else if !e.Type().IsRegular() {
			return nil
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	return files, nil
}

func isManifestName(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}
