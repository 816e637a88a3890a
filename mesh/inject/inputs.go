package inject

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// MaxInputBytes bounds one input file or stream of [ReadInputs].
const MaxInputBytes = 32 << 20

// Input is one named stream of YAML or JSON documents.
type Input struct {
	// Name is shown in errors ("web.yaml", "-" for stdin).
	Name string
	Data []byte
}

// ReadInputs reads the arguments of `weft inject`: files, directories
// (walked recursively for .yaml, .yml and .json files, in lexical order),
// or "-" for stdin. Each input is limited to [MaxInputBytes].
func ReadInputs(paths []string, stdin io.Reader) ([]Input, error) {
	var out []Input
	for _, p := range paths {
		if p == "-" {
			if stdin == nil {
				return nil, errors.New("inject: no stdin to read")
			}
			data, err := readLimited(stdin, "-")
			if err != nil {
				return nil, err
			}
			out = append(out, Input{Name: "-", Data: data})
			continue
		}
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("inject: %w", err)
		}
		if !info.IsDir() {
			in, err := readFile(p)
			if err != nil {
				return nil, err
			}
			out = append(out, in)
			continue
		}
		var files []string
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			switch strings.ToLower(filepath.Ext(path)) {
			case ".yaml", ".yml", ".json":
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("inject: %w", err)
		}
		sort.Strings(files)
		for _, f := range files {
			in, err := readFile(f)
			if err != nil {
				return nil, err
			}
			out = append(out, in)
		}
	}
	return out, nil
}

func readFile(path string) (Input, error) {
	f, err := os.Open(path)
	if err != nil {
		return Input{}, fmt.Errorf("inject: %w", err)
	}
	defer f.Close()
	data, err := readLimited(f, path)
	return Input{Name: path, Data: data}, err
}

func readLimited(r io.Reader, name string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxInputBytes+1))
	if err != nil {
		return nil, fmt.Errorf("inject: %s: %w", name, err)
	}
	if len(data) > MaxInputBytes {
		return nil, fmt.Errorf("inject: %s: larger than %d bytes", name, MaxInputBytes)
	}
	return data, nil
}
