package static

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/internal/filewatch"
)

// MaxFileSize bounds the token file.
const MaxFileSize = 4 << 20

// minTokenLength keeps trivially guessable tokens out of the file.
const minTokenLength = 16

// Entry is one line of the token file.
type Entry struct {
	Token          string `json:"token"`
	Namespace      string `json:"namespace"`
	ServiceAccount string `json:"serviceAccount"`
}

// fileFormat is the whole token file.
type fileFormat struct {
	Tokens []Entry `json:"tokens"`
}

// Set is a parsed token file: an in-memory identity.Authenticator keyed by
// the tokens' SHA-256 digests.
type Set struct {
	byDigest map[[32]byte]identity.ServiceAccount
}

// Parse parses a token file. Unknown fields, empty or short tokens,
// invalid namespaces or service accounts and duplicate tokens are errors
// naming the entry.
func Parse(data []byte) (*Set, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("static: token file of %d bytes exceeds %d", len(data), MaxFileSize)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("static: token file is empty (write \"tokens: []\" to revoke every token)")
	}
	var f fileFormat
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("static: token file: %w", err)
	}
	s := &Set{byDigest: make(map[[32]byte]identity.ServiceAccount, len(f.Tokens))}
	for i, e := range f.Tokens {
		if len(e.Token) < minTokenLength {
			return nil, fmt.Errorf("static: tokens[%d] (%s/%s): token shorter than %d characters", i, e.Namespace, e.ServiceAccount, minTokenLength)
		}
		if len(e.Token) > identity.MaxTokenSize {
			// Such a token could never be presented: CheckToken refuses it.
			return nil, fmt.Errorf("static: tokens[%d] (%s/%s): token of %d bytes exceeds %d", i, e.Namespace, e.ServiceAccount, len(e.Token), identity.MaxTokenSize)
		}
		sa := identity.ServiceAccount{Namespace: e.Namespace, Name: e.ServiceAccount}
		if err := sa.Validate(); err != nil {
			return nil, fmt.Errorf("static: tokens[%d]: %w", i, err)
		}
		d := sha256.Sum256([]byte(e.Token))
		if prev, dup := s.byDigest[d]; dup {
			return nil, fmt.Errorf("static: tokens[%d] (%s): the same token is already given to %s", i, sa, prev)
		}
		s.byDigest[d] = sa
	}
	return s, nil
}

// Len returns the number of tokens.
func (s *Set) Len() int { return len(s.byDigest) }

// Authenticate returns the service account the token proves.
func (s *Set) Authenticate(_ context.Context, token []byte) (identity.ServiceAccount, error) {
	if err := identity.CheckToken(token); err != nil {
		return identity.ServiceAccount{}, fmt.Errorf("static: %w", err)
	}
	sa, ok := s.byDigest[sha256.Sum256(token)]
	if !ok {
		return identity.ServiceAccount{}, fmt.Errorf("static: unknown token: %w", identity.ErrUnauthenticated)
	}
	return sa, nil
}

// Option tunes New.
type Option func(*config)

type config struct {
	logger   *slog.Logger
	interval time.Duration
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithPollInterval sets how often the file is polled besides filesystem
// notifications (default 2s).
func WithPollInterval(d time.Duration) Option { return func(c *config) { c.interval = d } }

// Tokens is an identity.Authenticator backed by a token file it follows.
type Tokens struct {
	path    string
	logger  *slog.Logger
	mu      sync.RWMutex
	set     *Set
	updated chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
	once    sync.Once
}

// New loads the token file at path and follows it until Close. ctx
// bounds the start only (New fails if it has already ended).
func New(ctx context.Context, path string, opts ...Option) (*Tokens, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("static: %w", err)
	}
	cfg := config{logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(&cfg)
	}
	w := filewatch.New(cfg.interval, path)
	set, err := load(path)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	t := &Tokens{path: path, logger: cfg.logger, set: set, updated: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		_ = w.Run(runCtx, t.reload)
	}()
	return t, nil
}

func load(path string) (*Set, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("static: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("static: read %s: %w", path, err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return s, nil
}

func (t *Tokens) reload() {
	s, err := load(t.path)
	if err != nil {
		t.logger.Error("token file reload failed; keeping the previous tokens", "file", t.path, "error", err)
		return
	}
	t.mu.Lock()
	t.set = s
	t.mu.Unlock()
	t.logger.Info("token file reloaded", "file", t.path, "tokens", s.Len())
	select {
	case t.updated <- struct{}{}:
	default:
	}
}

// Authenticate checks the token against the current file contents.
func (t *Tokens) Authenticate(ctx context.Context, token []byte) (identity.ServiceAccount, error) {
	t.mu.RLock()
	s := t.set
	t.mu.RUnlock()
	return s.Authenticate(ctx, token)
}

// Updated receives a value after each successful reload (coalesced).
func (t *Tokens) Updated() <-chan struct{} { return t.updated }

// Close stops following the file. It is safe to call more than once.
func (t *Tokens) Close() error {
	t.once.Do(func() {
		t.cancel()
		<-t.done
	})
	return nil
}

var _ identity.Authenticator = (*Tokens)(nil)
var _ identity.Authenticator = (*Set)(nil)
