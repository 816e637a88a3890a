package oci

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
)

// libraryDirs are where the dynamic loader of a Debian amd64 system looks
// for shared libraries when it has no cache (an image has no
// /etc/ld.so.cache).
var libraryDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/lib", "/usr/lib"}

// HostFile reads the host file at p (following symbolic links) as an image
// file at the same path with the host file's permission bits.
func HostFile(p string) (File, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return File{}, fmt.Errorf("oci: %w", err)
	}
	st, err := os.Stat(p)
	if err != nil {
		return File{}, fmt.Errorf("oci: %w", err)
	}
	return File{Path: p, Mode: st.Mode().Perm(), Data: data}, nil
}

// HostProgram returns the host's dynamically linked program at p with its
// ELF interpreter and every shared library it needs (transitively),
// resolved the way the loader resolves them without a cache, each at the
// path the loader opens. extra are more ELF objects the program loads at
// run time (plugins); their libraries come along too.
func HostProgram(p string, extra ...string) ([]File, error) {
	seen := map[string]bool{}
	var out []File
	var add func(p string) error
	add = func(p string) error {
		if seen[p] {
			return nil
		}
		seen[p] = true
		f, err := HostFile(p)
		if err != nil {
			return err
		}
		out = append(out, f)
		ef, err := elf.Open(p)
		if err != nil {
			return fmt.Errorf("oci: %s: %w", p, err)
		}
		defer ef.Close()
		for _, prog := range ef.Progs {
			if prog.Type != elf.PT_INTERP {
				continue
			}
			b := make([]byte, prog.Filesz)
			if _, err := prog.ReadAt(b, 0); err != nil {
				return fmt.Errorf("oci: %s: interpreter: %w", p, err)
			}
			if len(b) > 0 && b[len(b)-1] == 0 {
				b = b[:len(b)-1]
			}
			if err := add(string(b)); err != nil {
				return err
			}
		}
		libs, err := ef.ImportedLibraries()
		if err != nil {
			return fmt.Errorf("oci: %s: needed libraries: %w", p, err)
		}
		for _, lib := range libs {
			found := ""
			for _, dir := range libraryDirs {
				if _, err := os.Stat(filepath.Join(dir, lib)); err == nil {
					found = path.Join(dir, lib)
					break
				}
			}
			if found == "" {
				return fmt.Errorf("oci: %s needs %s, which is in none of %v", p, lib, libraryDirs)
			}
			if err := add(found); err != nil {
				return err
			}
		}
		return nil
	}
	for _, q := range append([]string{p}, extra...) {
		if err := add(q); err != nil {
			return nil, err
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// HostDir lists the regular files directly in dir (sorted), for plugins a
// program loads from a directory, and returns the symbolic links there as
// image links (iptables names several extensions by links to one file).
func HostDir(dir string) (files []string, links []File, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("oci: %w", err)
	}
	for _, e := range ents {
		p := path.Join(dir, e.Name())
		switch {
		case e.Type().IsRegular():
			files = append(files, p)
		case e.Type()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return nil, nil, fmt.Errorf("oci: %w", err)
			}
			links = append(links, File{Path: p, Link: target})
		}
	}
	if len(files) == 0 {
		return nil, nil, errors.New("oci: no file in " + dir)
	}
	return files, links, nil
}
