package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Stage is what a Dockerfile stage says about its image, as far as the
// images compare: its base, the files it copies from the build stage, its
// user and entrypoint, and the file capabilities its RUN lines set.
type Stage struct {
	Name       string
	From       string
	Copies     []string // destinations of COPY --from=build
	User       string
	Entrypoint []string
	// Setcap maps a path to the capabilities a `setcap CAPS+ep PATH` of a
	// RUN line grants ("cap_net_admin,cap_net_raw").
	Setcap map[string]string
}

// ParseDockerfile reads the stages of a Dockerfile: FROM ... AS, COPY,
// USER, ENTRYPOINT (exec form) and setcap in RUN. Continuation lines are
// joined; other instructions are ignored.
func ParseDockerfile(r io.Reader) (map[string]*Stage, error) {
	var (
		lines []string
		cur   strings.Builder
	)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || line == "" {
			continue // comments and blank lines, also inside a continued instruction
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	stages := map[string]*Stage{}
	var st *Stage
	for _, line := range lines {
		word, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(word) {
		case "FROM":
			f := strings.Fields(rest)
			var from, name string
			for i := 0; i < len(f); i++ {
				switch {
				case strings.HasPrefix(f[i], "--"):
				case strings.EqualFold(f[i], "AS") && i+1 < len(f):
					name = f[i+1]
					i++
				case from == "":
					from = f[i]
				}
			}
			if name == "" {
				return nil, fmt.Errorf("dockerfile: FROM %s has no stage name", rest)
			}
			st = &Stage{Name: name, From: from, Setcap: map[string]string{}}
			stages[name] = st
		case "COPY":
			if st == nil {
				return nil, fmt.Errorf("dockerfile: COPY before FROM")
			}
			f := strings.Fields(rest)
			if len(f) >= 3 && f[0] == "--from=build" {
				st.Copies = append(st.Copies, f[len(f)-1])
			}
		case "USER":
			if st != nil {
				st.User = rest
			}
		case "ENTRYPOINT":
			if st == nil {
				return nil, fmt.Errorf("dockerfile: ENTRYPOINT before FROM")
			}
			if err := json.Unmarshal([]byte(rest), &st.Entrypoint); err != nil {
				return nil, fmt.Errorf("dockerfile: stage %s: ENTRYPOINT must be in exec form: %w", st.Name, err)
			}
		case "RUN":
			if st == nil {
				continue
			}
			f := strings.Fields(rest)
			for i := 0; i+2 < len(f); i++ {
				if f[i] == "setcap" {
					caps := strings.TrimSuffix(f[i+1], "+ep")
					for j := i + 2; j < len(f) && strings.HasPrefix(f[j], "/"); j++ {
						st.Setcap[f[j]] = caps
					}
				}
			}
		}
	}
	return stages, nil
}
