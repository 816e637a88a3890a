package tapapi

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// User is the user the API server authenticated, as it passes it on.
type User struct {
	Name   string
	Groups []string
	Extra  map[string][]string
}

// ErrUnauthenticated means a request did not come from the API server's
// front proxy, or came without a user.
var ErrUnauthenticated = errors.New("tapapi: unauthenticated")

// Authenticator tells who sent a request.
type Authenticator interface {
	Authenticate(r *http.Request) (User, error)
}

// RequestHeader authenticates requests the Kubernetes API server proxies
// to an aggregated API: it trusts the user headers only on a connection
// whose client certificate chains to ClientCAs (for client
// authentication) and, when AllowedNames is not empty, has one of them as
// its common name. These are the cluster's requestheader-* settings (the
// ConfigMap kube-system/extension-apiserver-authentication). The TLS
// server must request client certificates (tls.RequestClientCert or
// stronger); the check is here, per request.
type RequestHeader struct {
	ClientCAs *x509.CertPool
	// AllowedNames are the accepted common names; empty accepts any
	// certificate ClientCAs signed, as Kubernetes does.
	AllowedNames []string
	// UsernameHeaders, GroupHeaders and ExtraHeaderPrefixes name the
	// headers (X-Remote-User, X-Remote-Group, X-Remote-Extra-).
	UsernameHeaders     []string
	GroupHeaders        []string
	ExtraHeaderPrefixes []string
}

// Authenticate checks the client certificate, then reads the user.
func (h *RequestHeader) Authenticate(r *http.Request) (User, error) {
	if h == nil || h.ClientCAs == nil {
		return User{}, fmt.Errorf("%w: no requestheader client CA configured", ErrUnauthenticated)
	}
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return User{}, fmt.Errorf("%w: no client certificate (only the Kubernetes API server may call this API)", ErrUnauthenticated)
	}
	leaf := r.TLS.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: h.ClientCAs, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return User{}, fmt.Errorf("%w: client certificate %q does not chain to the requestheader client CA: %v", ErrUnauthenticated, leaf.Subject.CommonName, err)
	}
	if len(h.AllowedNames) > 0 && !slices.Contains(h.AllowedNames, leaf.Subject.CommonName) {
		return User{}, fmt.Errorf("%w: client certificate common name %q is not an allowed requestheader name", ErrUnauthenticated, leaf.Subject.CommonName)
	}
	var u User
	for _, name := range h.UsernameHeaders {
		if v := strings.TrimSpace(r.Header.Get(name)); v != "" {
			u.Name = v
			break
		}
	}
	if u.Name == "" {
		return User{}, fmt.Errorf("%w: no user in %s", ErrUnauthenticated, strings.Join(h.UsernameHeaders, ", "))
	}
	for _, name := range h.GroupHeaders {
		u.Groups = append(u.Groups, r.Header.Values(name)...)
	}
	for k, vs := range r.Header {
		for _, p := range h.ExtraHeaderPrefixes {
			if len(k) <= len(p) || !strings.EqualFold(k[:len(p)], p) {
				continue
			}
			key, err := url.PathUnescape(strings.ToLower(k[len(p):]))
			if err != nil {
				continue
			}
			if u.Extra == nil {
				u.Extra = map[string][]string{}
			}
			u.Extra[key] = append(u.Extra[key], vs...)
		}
	}
	return u, nil
}

// Attributes are what a user asks for: Verb on Resource/Subresource
// (Name) in Namespace, in Group.
type Attributes struct {
	User      User
	Namespace string
	Resource  string
	Name      string
}

// Authorizer decides whether a user may tap. An error denies (fail
// closed); reason, when not empty, says why a request was denied.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (allowed bool, reason string, err error)
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(ctx context.Context, a Attributes) (bool, string, error)

// Authorize calls f.
func (f AuthorizerFunc) Authorize(ctx context.Context, a Attributes) (bool, string, error) {
	return f(ctx, a)
}

// forbidden is the message of a denial, in the words the API server uses.
func forbidden(a Attributes, reason string) string {
	what := fmt.Sprintf("resource %q", a.Resource+"/"+Subresource)
	if a.Name != "" {
		what += fmt.Sprintf(" (%s)", a.Name)
	}
	msg := fmt.Sprintf("user %q cannot %s %s in API group %q in the namespace %q", a.User.Name, Verb, what, Group, a.Namespace)
	if reason != "" {
		msg += ": " + reason
	}
	return msg
}
