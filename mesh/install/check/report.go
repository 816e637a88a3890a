package check

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"
)

// Status is the outcome of one check.
type Status string

// Outcomes. Only StatusFail makes a report fail.
const (
	StatusOK   Status = "ok"
	StatusWarn Status = "warning"
	StatusFail Status = "fail"
	// StatusSkip means the check could not run because an earlier one
	// failed (the message says which).
	StatusSkip Status = "skipped"
)

// Result is one check's outcome.
type Result struct {
	// Category groups checks ("kubernetes-api", "crds", "control-plane",
	// "identity", "webhooks", "data-plane", "pre-install").
	Category string `json:"category"`
	// Name says what is checked, as a statement that holds when it passes.
	Name    string `json:"name"`
	Status  Status `json:"status"`
	Message string `json:"message,omitempty"`
	// Hint says what to do about a warning or failure.
	Hint string `json:"hint,omitempty"`
	// NotReady marks a failure caused only by something not being ready
	// yet (pods starting, endpoints not published): it may pass later
	// without anyone acting, so Wait retries it. A missing object, a
	// refused request or a bad certificate is not NotReady.
	NotReady bool `json:"notReady,omitempty"`
}

// Report is the outcome of a run, in the order the checks ran.
type Report struct {
	Results []Result `json:"results"`
	// Success is false when any check failed.
	Success bool `json:"success"`
}

// Find returns the first result with the given category and name.
func (r Report) Find(category, name string) (Result, bool) {
	for _, res := range r.Results {
		if res.Category == category && res.Name == name {
			return res, true
		}
	}
	return Result{}, false
}

// OnlyNotReady is true when the report failed and every failure is
// NotReady: running the checks again later may pass.
func (r Report) OnlyNotReady() bool {
	failed := false
	for _, res := range r.Results {
		if res.Status == StatusFail {
			if !res.NotReady {
				return false
			}
			failed = true
		}
	}
	return failed
}

// Count returns how many results have status s.
func (r Report) Count(s Status) int {
	n := 0
	for _, res := range r.Results {
		if res.Status == s {
			n++
		}
	}
	return n
}

var marks = map[Status]string{StatusOK: "[ok]  ", StatusWarn: "[warn]", StatusFail: "[FAIL]", StatusSkip: "[skip]"}

// WriteText writes one line per check, grouped under category headings,
// with the message after the name and the hint indented below, then a
// summary line:
//
//	control-plane
//	-------------
//	[ok]   control-plane namespace exists: weft
//	[FAIL] identity is ready: Deployment weft/weft-identity: 0 of 1 pods ready; no pods exist
//	       hint: kubectl -n weft describe deployment weft-identity
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	last := ""
	for _, res := range r.Results {
		if res.Category != last {
			if last != "" {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "%s\n%s\n", res.Category, strings.Repeat("-", len(res.Category)))
			last = res.Category
		}
		fmt.Fprintf(&b, "%s %s", marks[res.Status], res.Name)
		if res.Message != "" {
			fmt.Fprintf(&b, ": %s", res.Message)
		}
		b.WriteString("\n")
		if res.Hint != "" && res.Status != StatusOK {
			fmt.Fprintf(&b, "       hint: %s\n", res.Hint)
		}
	}
	verdict := "all checks passed"
	if !r.Success {
		verdict = "checks FAILED"
	}
	fmt.Fprintf(&b, "\n%s: %d ok, %d warnings, %d failed, %d skipped\n", verdict,
		r.Count(StatusOK), r.Count(StatusWarn), r.Count(StatusFail), r.Count(StatusSkip))
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the report as one indented JSON object.
func (r Report) WriteJSON(w io.Writer) error {
	if r.Results == nil {
		r.Results = []Result{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteYAML writes the report as YAML, with the field names of WriteJSON.
func (r Report) WriteYAML(w io.Writer) error {
	if r.Results == nil {
		r.Results = []Result{}
	}
	b, err := yaml.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
