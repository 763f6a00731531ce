package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/store"
	"slices"

	"github.com/redis/go-redis/v9"
)

// Artifacts are named JSON outputs of a job: a running job attaches them
// with its claim token ([Client.AttachArtifacts]) or with its completion
// ([CompleteOptions].Artifacts, [Ack].Artifacts). They are kept with the job
// (deleted with it) in the queue's data hash, field "<id>.a": one JSON
// object, name -> value. An artifact given again replaces the earlier
// value; none is ever removed while the job lives (a retried job keeps the
// artifacts of its earlier attempts).
const (
	// MaxArtifacts caps the artifacts of one job.
	MaxArtifacts = 32
	// MaxArtifactNameBytes caps an artifact's name, 1 to this many of
	// [A-Za-z0-9._-].
	MaxArtifactNameBytes = names.MaxArtifactNameBytes
	// MaxArtifactBytes caps one artifact's value (compact JSON).
	MaxArtifactBytes = 256 << 10
	// MaxArtifactsBytes caps all of a job's artifacts together: the JSON
	// object as stored.
	MaxArtifactsBytes = 1 << 20
)

// Answers of the scripts that set artifacts (artifacts.lua, complete.lua).
const (
	codeArtifactsCount = -2 // more than MaxArtifacts
	codeArtifactsBytes = -3 // more than MaxArtifactsBytes
)

// validateArtifactName reports whether name can name an artifact: 1 to
// MaxArtifactNameBytes of [A-Za-z0-9._-].
func validateArtifactName(name string) error {
	if name == "" || len(name) > MaxArtifactNameBytes {
		return invalid("artifacts", "an artifact's name is 1 to %d bytes, got %d", MaxArtifactNameBytes, len(name))
	}
	if !names.ArtifactNameOK(name) {
		return invalid("artifacts", "artifact name %q: only [A-Za-z0-9._-]", name)
	}
	return nil
}

// encodeArtifacts checks arts and writes them as the scripts read them: a
// compact JSON object, names sorted. An empty map is "".
func encodeArtifacts(arts map[string]json.RawMessage) (string, error) {
	if len(arts) == 0 {
		return "", nil
	}
	if len(arts) > MaxArtifacts {
		return "", &FieldError{Index: -1, Field: "artifacts", Err: fmt.Errorf("%w: %d artifacts, the cap is %d a job", ErrPayloadTooLarge, len(arts), MaxArtifacts)}
	}
	names := make([]string, 0, len(arts))
	for n := range arts {
		if err := validateArtifactName(n); err != nil {
			return "", err
		}
		names = append(names, n)
	}
	slices.Sort(names)
	var b bytes.Buffer
	b.WriteByte('{')
	for i, n := range names {
		v := arts[n]
		if len(v) == 0 || !json.Valid(v) {
			return "", invalid("artifacts."+n, "not valid JSON")
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + n + `":`)
		start := b.Len()
		if err := json.Compact(&b, v); err != nil {
			return "", invalid("artifacts."+n, "not valid JSON")
		}
		if size := b.Len() - start; size > MaxArtifactBytes {
			return "", &FieldError{Index: -1, Field: "artifacts." + n, Err: fmt.Errorf("%w: %d bytes, the cap is %d an artifact", ErrPayloadTooLarge, size, MaxArtifactBytes)}
		}
	}
	b.WriteByte('}')
	if b.Len() > MaxArtifactsBytes {
		return "", artifactsErr(codeArtifactsBytes)
	}
	return b.String(), nil
}

// artifactsErr is the error of a script's answer that a cap would pass.
func artifactsErr(code int64) error {
	if code == codeArtifactsCount {
		return &FieldError{Index: -1, Field: "artifacts", Err: fmt.Errorf("%w: a job holds at most %d artifacts", ErrPayloadTooLarge, MaxArtifacts)}
	}
	return &FieldError{Index: -1, Field: "artifacts", Err: fmt.Errorf("%w: a job's artifacts hold at most %d bytes of JSON", ErrPayloadTooLarge, MaxArtifactsBytes)}
}

// AttachArtifacts sets artifacts of a claimed job while it runs, over those
// it has (a name given again is replaced). It answers ErrLeaseLost, and
// changes nothing, when token is not the job's current claim, and an error
// wrapping ErrPayloadTooLarge (a *FieldError naming "artifacts"), changing
// nothing, when the job's artifacts would pass MaxArtifacts or
// MaxArtifactsBytes, or a value MaxArtifactBytes.
func (c *Client) AttachArtifacts(ctx context.Context, queue, id, token string, arts map[string]json.RawMessage) error {
	k, err := c.keysFor(queue)
	if err != nil {
		return err
	}
	if err := names.ValidateID(id); err != nil {
		return err
	}
	if len(arts) == 0 {
		return invalid("artifacts", "give at least one artifact")
	}
	enc, err := encodeArtifacts(arts)
	if err != nil {
		return err
	}
	res, err := call(ctx, c, store.Artifacts, k, &store.ArtifactsArgs{ID: id, Token: token, Artifacts: enc})
	if err != nil {
		return fmt.Errorf("queue: attach artifacts to %s/%s: %w", queue, id, err)
	}
	code := res.Code
	if code == codeArtifactsCount || code == codeArtifactsBytes {
		return artifactsErr(code)
	}
	return codeErr(code, queue, id)
}

// Artifacts reads a job's artifacts: a JSON object, name -> value ({}
// when it has none).
func (c *Client) Artifacts(ctx context.Context, queue, id string) (json.RawMessage, error) {
	k, err := c.keysFor(queue)
	if err != nil {
		return nil, err
	}
	if err := names.ValidateID(id); err != nil {
		return nil, err
	}
	pipe := c.rdb.Pipeline()
	rec := pipe.HGet(ctx, k.Jobs, id)
	arts := pipe.HGet(ctx, k.Data, store.ArtifactsField(id))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, wrapRedis(err)
	}
	if r := rec.Val(); r == "" || r[0] == '-' {
		return nil, fmt.Errorf("%w: %s/%s", ErrNotFound, queue, id)
	}
	if a := arts.Val(); a != "" {
		return json.RawMessage(a), nil
	}
	return json.RawMessage("{}"), nil
}

// CompleteOptions are what a completion stores with the job.
type CompleteOptions struct {
	// Result is stored with the job (any JSON, at most
	// Config.MaxPayloadBytes). Optional.
	Result json.RawMessage
	// Artifacts are set over the job's artifacts, as AttachArtifacts does,
	// in the same script as the completion: when they would pass a cap the
	// job is not completed. Optional.
	Artifacts map[string]json.RawMessage
}
