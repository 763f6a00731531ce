package dispatch

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Signing follows Standard Webhooks (https://www.standardwebhooks.com):
// every request carries webhook-id, webhook-timestamp (Unix seconds) and
// webhook-signature, "v1,<base64 HMAC-SHA256 of id.timestamp.body>", one
// such signature per secret of the queue, separated by spaces. A queue
// holds at most two secrets, so that a receiver can move to a new one
// without a moment where requests fail: add the new secret (requests are
// signed with both), switch the receiver, drop the old one.

// The Standard Webhooks headers.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// chronoq's own headers on every request.
const (
	HeaderQueue   = "chronoq-queue"
	HeaderJobID   = "chronoq-job-id"
	HeaderAttempt = "chronoq-attempt"
	HeaderFence   = "chronoq-fence"
	HeaderKind    = "chronoq-kind"
	HeaderEvent   = "chronoq-event" // an event webhook's event type
)

// secretPrefix starts every secret: "whsec_" and the key in base64.
const secretPrefix = "whsec_"

// MaxSecrets is how many signing secrets a queue holds at once.
const MaxSecrets = 2

// Errors of Verify.
var (
	ErrNoSignature  = errors.New("dispatch: missing webhook-id, webhook-timestamp or webhook-signature")
	ErrBadTimestamp = errors.New("dispatch: webhook-timestamp too old, too new or malformed")
	ErrBadSignature = errors.New("dispatch: no signature matches")
)

// NewSecret makes a random signing secret, "whsec_" and 32 bytes in base64.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return secretPrefix + base64.StdEncoding.EncodeToString(b)
}

// secretKey is the HMAC key of a secret: its base64 after the "whsec_".
func secretKey(secret string) ([]byte, error) {
	s := strings.TrimPrefix(secret, secretPrefix)
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("a secret is %q and base64: %w", secretPrefix, err)
	}
	if len(key) < 16 || len(key) > 64 {
		return nil, fmt.Errorf("a secret's key is 16 to 64 bytes, got %d", len(key))
	}
	return key, nil
}

// Sign answers the webhook-signature value of a message: "v1,<base64>",
// one per secret, space-separated.
func Sign(secrets []string, id string, ts time.Time, body []byte) (string, error) {
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		key, err := secretKey(s)
		if err != nil {
			return "", err
		}
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(mac(key, id, ts.Unix(), body)))
	}
	return strings.Join(sigs, " "), nil
}

func mac(key []byte, id string, ts int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(nil, ts, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// DefaultTolerance is how far from the receiver's clock Verify accepts a
// webhook-timestamp, as the Standard Webhooks libraries do.
const DefaultTolerance = 5 * time.Minute

// Verify checks a request chronoq sent, for receivers: the Standard
// Webhooks headers, a timestamp within tolerance of now (0:
// DefaultTolerance), and a signature by one of secrets (give both while
// rotating). body is the raw request body. Any Standard Webhooks library
// does the same.
//
//	body, _ := io.ReadAll(r.Body)
//	if err := dispatch.Verify(r.Header, body, time.Now(), 0, secret); err != nil {
//		http.Error(w, "bad signature", http.StatusUnauthorized)
//		return
//	}
func Verify(h http.Header, body []byte, now time.Time, tolerance time.Duration, secrets ...string) error {
	id, tsv, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || tsv == "" || sigs == "" {
		return ErrNoSignature
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	ts, err := strconv.ParseInt(tsv, 10, 64)
	if err != nil {
		return ErrBadTimestamp
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return ErrBadTimestamp
	}
	for _, s := range secrets {
		key, err := secretKey(s)
		if err != nil {
			return fmt.Errorf("dispatch: verify: %w", err)
		}
		want := mac(key, id, ts, body)
		for _, sig := range strings.Fields(sigs) {
			v, b64, ok := strings.Cut(sig, ",")
			if !ok || v != "v1" {
				continue
			}
			got, err := base64.StdEncoding.DecodeString(b64)
			if err == nil && hmac.Equal(got, want) {
				return nil
			}
		}
	}
	return ErrBadSignature
}
