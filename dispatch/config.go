package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/plumbing"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/chronoq/chronoq/queue"
)

// Target is where a push job is sent: the queue's, or a job's own.
type Target struct {
	// URL is http or https; checked by the Guard.
	URL string
	// Method is GET, POST, PUT, PATCH or DELETE. Defaults to POST.
	Method string
	// Headers are sent with every request (not Host, Content-Length,
	// Content-Type, Transfer-Encoding, Connection, nor the webhook-* and
	// chronoq-* headers chronoq sets).
	Headers map[string]string
	// Timeout is the whole request's, from dial to the end of the response
	// body, 1 s to 30 min. Defaults to 30 s.
	Timeout time.Duration
}

// Limits of a target.
const (
	DefaultTimeout = 30 * time.Second
	MinTimeout     = time.Second
	MaxTimeout     = 30 * time.Minute
	maxHeaders     = 50
	maxHeaderBytes = 8 << 10
)

// methods a target may use.
var methods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// reservedHeaders are set by chronoq (or by Go's HTTP client).
var reservedHeaders = []string{"host", "content-length", "content-type", "transfer-encoding", "connection", "te",
	"upgrade", "trailer", "keep-alive", "proxy-connection"}

func invalid(field, format string, args ...any) error {
	return &queue.FieldError{Index: -1, Field: field, Err: fmt.Errorf("%w: "+format, append([]any{queue.ErrInvalid}, args...)...)}
}

// Validate checks t and fills its defaults. field prefixes the names of
// the fields in its errors ("target", "config"). g checks the URL.
func (t *Target) Validate(g Guard, field string) error {
	if t.URL == "" {
		return invalid(field+".url", "a URL is required")
	}
	if err := g.CheckURL(t.URL); err != nil {
		return invalid(field+".url", "%v", err)
	}
	t.Method = strings.ToUpper(t.Method)
	if t.Method == "" {
		t.Method = http.MethodPost
	}
	if !slices.Contains(methods, t.Method) {
		return invalid(field+".method", "must be one of %s, got %q", strings.Join(methods, ", "), t.Method)
	}
	if t.Timeout == 0 {
		t.Timeout = DefaultTimeout
	}
	if t.Timeout < MinTimeout || t.Timeout > MaxTimeout {
		return invalid(field+".timeout", "must be in [%s, %s], got %s", MinTimeout, MaxTimeout, t.Timeout)
	}
	if len(t.Headers) > maxHeaders {
		return invalid(field+".headers", "at most %d headers, got %d", maxHeaders, len(t.Headers))
	}
	size := 0
	for k, v := range t.Headers {
		lk := strings.ToLower(k)
		switch {
		case !validHeaderName(k):
			return invalid(field+".headers", "%q is not a header name", k)
		case slices.Contains(reservedHeaders, lk) || strings.HasPrefix(lk, "webhook-") || strings.HasPrefix(lk, "chronoq-"):
			return invalid(field+".headers", "%s is set by chronoq", k)
		case strings.ContainsAny(v, "\r\n\x00"):
			return invalid(field+".headers", "the value of %s holds a line break or NUL", k)
		}
		size += len(k) + len(v)
	}
	if size > maxHeaderBytes {
		return invalid(field+".headers", "headers hold %d bytes, the cap is %d", size, maxHeaderBytes)
	}
	return nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r > 127 || !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return true
}

// QueueConfig is a push queue's configuration: a queue that has one is a
// push queue, whose jobs the dispatchers send to its target.
type QueueConfig struct {
	// Target is where the queue's jobs go. A job may carry its own (see
	// Envelope); a queue whose Target has no URL sends only such jobs.
	Target Target
	// Secrets sign the requests (Standard Webhooks), one or two: while two
	// are set every request carries both signatures. Put generates one
	// when none is given and the queue has none yet, and keeps the
	// queue's when none is given.
	Secrets []string
	// Concurrency caps the requests of this queue under way at once in
	// each dispatcher, 1 to 10,000. Defaults to DefaultConcurrency.
	Concurrency int
	// Labels are the endpoint's labels: the dispatchers claim with them
	// (queue.ClaimOptions.Labels) and register them in the worker registry,
	// so the queue's jobs whose labels are all among them are pushed, and
	// the others wait for a pull worker that has theirs. At most
	// queue.MaxClaimLabels, each as a claim's; Validate sorts them and
	// drops duplicates. Defaults to none: only jobs without labels are
	// pushed.
	Labels []string
}

// DefaultConcurrency is the requests of one queue a dispatcher has under
// way at once, unless the queue's config says otherwise.
const DefaultConcurrency = 100

const maxConcurrency = 10_000

// Validate checks c and fills its defaults (not the secrets: see
// Store.Put).
func (c *QueueConfig) Validate(g Guard) error {
	if c.Target.URL != "" || c.Target.Method != "" || len(c.Target.Headers) > 0 || c.Target.Timeout != 0 {
		if err := c.Target.Validate(g, "target"); err != nil {
			return err
		}
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Concurrency < 1 || c.Concurrency > maxConcurrency {
		return invalid("concurrency", "must be in [1, %d], got %d", maxConcurrency, c.Concurrency)
	}
	labels, err := names.CanonicalLabels(c.Labels, queue.MaxClaimLabels)
	if err != nil {
		return &queue.FieldError{Index: -1, Field: "labels", Err: err}
	}
	c.Labels = labels
	if len(c.Secrets) > MaxSecrets {
		return invalid("secrets", "at most %d secrets (the current one and the next), got %d", MaxSecrets, len(c.Secrets))
	}
	for i, s := range c.Secrets {
		if _, err := secretKey(s); err != nil {
			return invalid(fmt.Sprintf("secrets[%d]", i), "%v", err)
		}
	}
	return nil
}

// stored is a QueueConfig as the queue's meta hash keeps it (queue.SettingPush).
type stored struct {
	URL         string            `json:"url,omitempty"`
	Method      string            `json:"method,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	TimeoutMs   int64             `json:"timeout_ms,omitempty"`
	Secrets     []string          `json:"secrets"`
	Concurrency int               `json:"concurrency,omitempty"`
	Labels      []string          `json:"labels,omitempty"`
}

func (c QueueConfig) encode() string {
	b, _ := json.Marshal(stored{URL: c.Target.URL, Method: c.Target.Method, Headers: c.Target.Headers,
		TimeoutMs: c.Target.Timeout.Milliseconds(), Secrets: c.Secrets, Concurrency: c.Concurrency, Labels: c.Labels})
	return string(b)
}

func decodeConfig(s string) (QueueConfig, error) {
	var st stored
	if err := json.Unmarshal([]byte(s), &st); err != nil {
		return QueueConfig{}, fmt.Errorf("dispatch: stored config: %w", err)
	}
	c := QueueConfig{Target: Target{URL: st.URL, Method: st.Method, Headers: st.Headers,
		Timeout: time.Duration(st.TimeoutMs) * time.Millisecond}, Secrets: st.Secrets, Concurrency: st.Concurrency,
		Labels: st.Labels}
	if c.Target.Method == "" {
		c.Target.Method = http.MethodPost
	}
	if c.Target.Timeout == 0 {
		c.Target.Timeout = DefaultTimeout
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	return c, nil
}

// ErrNoConfig is a queue with no push config: not a push queue.
var ErrNoConfig = errors.New("dispatch: the queue has no push config")

// Store reads and writes push configs, kept in each queue's meta hash
// (queue.SettingPush): in the queue's slot, so every instance sees the
// same, and deleted with the queue.
type Store struct {
	client *queue.Client
	guard  Guard
}

// NewStore is a Store over client whose URLs g checks.
func NewStore(client *queue.Client, g Guard) *Store { return &Store{client: client, guard: g} }

// Guard is the store's guard.
func (s *Store) Guard() Guard { return s.guard }

// Get reads the config of q; ErrNoConfig when it has none.
func (s *Store) Get(ctx context.Context, q string) (QueueConfig, error) {
	set, err := plumbing.Of(s.client).Settings(ctx, q)
	if err != nil {
		return QueueConfig{}, err
	}
	v, ok := set[queue.SettingPush]
	if !ok {
		return QueueConfig{}, fmt.Errorf("%w: %s", ErrNoConfig, q)
	}
	return decodeConfig(v)
}

// Put validates c and makes it q's config (creating the queue), answering
// it as stored. Secrets left out keep the queue's, or get a new one.
func (s *Store) Put(ctx context.Context, q string, c QueueConfig) (QueueConfig, error) {
	if err := names.ValidateQueue(q); err != nil {
		return QueueConfig{}, err
	}
	if err := c.Validate(s.guard); err != nil {
		return QueueConfig{}, err
	}
	if len(c.Secrets) == 0 {
		old, err := s.Get(ctx, q)
		switch {
		case err == nil:
			c.Secrets = old.Secrets
		case errors.Is(err, ErrNoConfig):
			c.Secrets = []string{NewSecret()}
		default:
			return QueueConfig{}, err
		}
	}
	if err := plumbing.Of(s.client).SetSettings(ctx, q, map[string]string{queue.SettingPush: c.encode()}); err != nil {
		return QueueConfig{}, err
	}
	return c, nil
}

// Delete removes q's config: its jobs are no longer pushed (they wait
// for a pull worker, or a new config). ErrNoConfig when it had none.
func (s *Store) Delete(ctx context.Context, q string) error {
	if _, err := s.Get(ctx, q); err != nil {
		return err
	}
	return plumbing.Of(s.client).SetSettings(ctx, q, map[string]string{queue.SettingPush: ""})
}

// All reads the configs of every queue that has one.
func (s *Store) All(ctx context.Context) (map[string]QueueConfig, error) {
	qs, err := s.client.Queues(ctx)
	if err != nil {
		return nil, err
	}
	raw, err := plumbing.Of(s.client).SettingsOf(ctx, queue.SettingPush, qs)
	if err != nil {
		return nil, err
	}
	out := make(map[string]QueueConfig, len(raw))
	for q, v := range raw {
		c, err := decodeConfig(v)
		if err != nil {
			return nil, fmt.Errorf("%w (queue %s)", err, q)
		}
		out[q] = c
	}
	return out, nil
}
