package discovery

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
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
		return ContextToken{}, fmt.Errorf("discovery: context token is %d bytes, over the limit of %d", len(s), maxTokenLen)
	}
	var tok ContextToken
	if strings.HasPrefix(strings.TrimSpace(s), "{") {
		if err := json.Unmarshal([]byte(s), &tok); err != nil {
			return ContextToken{}, fmt.Errorf("discovery: context token %q: %w", truncate(s, 80), err)
		}
	} else if ns, ok := strings.CutPrefix(s, "ns:"); ok {
		tok.Namespace = ns
	} else {
		return ContextToken{}, fmt.Errorf("discovery: context token %q is neither JSON nor ns:<namespace>", truncate(s, 80))
	}
	if tok.Namespace != "" {
		if errs := validation.IsDNS1123Label(tok.Namespace); len(errs) > 0 {
			return ContextToken{}, fmt.Errorf("discovery: context token namespace %q: %s", truncate(tok.Namespace, 70), errs[0])
		}
	}
	return tok, nil
}
