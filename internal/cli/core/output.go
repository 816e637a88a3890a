package core

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"
)

// CheckOutput accepts an -o/--output value among allowed.
func CheckOutput(output string, allowed ...string) error {
	for _, a := range allowed {
		if output == a {
			return nil
		}
	}
	return fmt.Errorf("-o %q: want %s", output, strings.Join(allowed, ", "))
}

// WriteObject prints v as indented JSON or as YAML (format "json" or
// "yaml"), the form every command that prints objects offers with -o.
func WriteObject(w io.Writer, format string, v any) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("output format %q: want json or yaml", format)
}
