package model

import (
	"encoding/json"
	"fmt"
	"strings"
)

// maxTokenLen bounds the context token a server reads.
const maxTokenLen = 4096

// ContextToken is what a proxy says about itself in
// GetDestination.context_token: a JSON object such as
// {"ns":"shop","nodeName":"node-1","pod":"web-5d8f"}. The namespace selects
// client-side ServiceProfiles.
type ContextToken struct {
	Namespace string `json:"ns,omitempty"`
	NodeName  string `json:"nodeName,omitempty"`
	Pod       string `json:"pod,omitempty"`
}

// ParseContextToken parses a context token. The empty string is the empty
// token. The legacy form "ns:<namespace>" is accepted. A token that is not
// valid JSON, carries fields of the wrong type or names an invalid
// namespace is an error; servers log it and carry on without the token.
func ParseContextToken(s string) (ContextToken, error) {
	if s == "" {
		return ContextToken{}, nil
	}
	if len(s) > maxTokenLen {
		return ContextToken{}, fmt.Errorf("model: context token is %d bytes, over the limit of %d", len(s), maxTokenLen)
	}
	var tok ContextToken
	if strings.HasPrefix(strings.TrimSpace(s), "{") {
		if err := json.Unmarshal([]byte(s), &tok); err != nil {
			return ContextToken{}, fmt.Errorf("model: context token %q: %w", truncate(s, 80), err)
		}
	} else if ns, ok := strings.CutPrefix(s, "ns:"); ok {
		tok.Namespace = ns
	} else {
		return ContextToken{}, fmt.Errorf("model: context token %q is neither JSON nor ns:<namespace>", truncate(s, 80))
	}
	if tok.Namespace != "" {
		if why := dnsLabelProblem(tok.Namespace); why != "" {
			return ContextToken{}, fmt.Errorf("model: context token namespace %q: %s", truncate(tok.Namespace, 70), why)
		}
	}
	return tok, nil
}

// dnsLabelProblem says why s is not an RFC 1123 label (what Kubernetes
// requires of a namespace name), or "" when it is one. It is written here
// rather than taken from k8s.io/apimachinery so that the proxy, which
// parses its own token, links nothing of Kubernetes.
func dnsLabelProblem(s string) string {
	if len(s) > 63 {
		return "must be no more than 63 characters"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		switch {
		case alnum:
		case c == '-' && i > 0 && i < len(s)-1:
		default:
			return "must be a lowercase RFC 1123 label: lower case letters, digits and '-', starting and ending with a letter or digit"
		}
	}
	return ""
}

// truncate shortens s to at most n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
