package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/chronoq/chronoq/internal/names"
	"github.com/chronoq/chronoq/internal/plumbing"
	"github.com/chronoq/chronoq/internal/store"

	"github.com/redis/go-redis/v9"
)

// Settings are a queue's own configuration (its push target, for package
// dispatch), kept as fields of its meta hash: in the queue's slot, so
// every instance reads the same, and gone with the queue when it is
// deleted. Only the names of settingFields (SettingPush, ...) can be set;
// their values are opaque to this package.

// Settings reads the settings of queue that are set: a field absent from
// the map is unset. A queue that does not exist has none.
func (in *inside) Settings(ctx context.Context, queue string) (map[string]string, error) {
	c := (*Client)(in)
	k, err := c.keysFor(queue)
	if err != nil {
		return nil, err
	}
	vals, err := c.rdb.HMGet(ctx, k.Meta, store.SettingFields...).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("queue: settings of %s: %w", queue, wrapRedis(err))
	}
	out := map[string]string{}
	for i, v := range vals {
		if s, ok := v.(string); ok && s != "" {
			out[store.SettingFields[i]] = s
		}
	}
	return out, nil
}

// SettingsOf reads one setting of many queues in one round trip: the
// value of field for each queue of queues that has it set.
func (in *inside) SettingsOf(ctx context.Context, field string, queues []string) (map[string]string, error) {
	c := (*Client)(in)
	if !slices.Contains(store.SettingFields, field) {
		return nil, invalid("setting", "no setting %q", field)
	}
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(queues))
	for i, q := range queues {
		k, err := c.keysFor(q)
		if err != nil {
			return nil, err
		}
		cmds[i] = pipe.HGet(ctx, k.Meta, field)
	}
	if len(queues) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("queue: settings: %w", wrapRedis(err))
		}
	}
	out := map[string]string{}
	for i, cmd := range cmds {
		if v := cmd.Val(); v != "" {
			out[queues[i]] = v
		}
	}
	return out, nil
}

// SetSettings writes settings of queue, creating the queue when it does
// not exist (within Config.MaxQueues); a value "" unsets its field. The
// names must be settings (SettingPush, ...). One script: the fields
// change together.
func (in *inside) SetSettings(ctx context.Context, queue string, set map[string]string) error {
	c := (*Client)(in)
	if _, err := c.keysFor(queue); err != nil {
		return err
	}
	if len(set) == 0 {
		return nil
	}
	for n := range set {
		if !slices.Contains(store.SettingFields, n) {
			return invalid("setting", "no setting %q (the settings are %s)", n, strings.Join(store.SettingFields, ", "))
		}
	}
	return c.writeSettings(ctx, queue, set)
}

// writeSettings writes fields of queue's meta hash ("" unsets one),
// creating the queue when it does not exist: SetSettings and SetLimits.
func (c *Client) writeSettings(ctx context.Context, queue string, set map[string]string) error {
	k, err := c.keysFor(queue)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	p := store.SettingsArgs{Fields: make([]store.SettingsItem, 0, len(names))}
	for _, n := range names {
		p.Fields = append(p.Fields, store.SettingsItem{Field: n, Value: set[n]})
	}
	if err := c.register(ctx, queue); err != nil {
		return err
	}
	for range 2 {
		res, err := call(ctx, c, store.Settings, k, &p)
		if err != nil {
			return fmt.Errorf("queue: settings of %s: %w", queue, err)
		}
		if res.Code == 1 {
			return nil
		}
		// Deleted since this process created it: make it again.
		c.known.Delete(queue)
		if err := c.register(ctx, queue); err != nil {
			return err
		}
	}
	return fmt.Errorf("queue: settings of %s: the queue was deleted while they were written", queue)
}

// MaxNotes is how many notes a job keeps, the latest.
const MaxNotes = 20

// Note appends a line (no newline in it) to a claimed job's notes, the
// last MaxNotes of which are kept with the job: package dispatch logs
// each attempt there (its status code, duration and error). It answers
// ErrLeaseLost, and writes nothing, when token is not the job's current
// claim.
func (in *inside) Note(ctx context.Context, queue, id, token, line string) error {
	errs, err := in.NoteMany(ctx, queue, []plumbing.NoteItem{{ID: id, Token: token, Line: line}})
	if err != nil {
		return err
	}
	return errs[0]
}

// NoteMany is Note for up to MaxBatch jobs of one queue in one script
// call. The first error is for the call as a whole; otherwise errs[i] is
// the answer for notes[i] (nil, ErrLeaseLost or ErrNotFound).
func (in *inside) NoteMany(ctx context.Context, queue string, notes []plumbing.NoteItem) (errs []error, err error) {
	c := (*Client)(in)
	k, err := c.keysFor(queue)
	if err != nil {
		return nil, err
	}
	if len(notes) == 0 || len(notes) > MaxBatch {
		return nil, invalid("notes", "a batch holds 1 to %d, got %d", MaxBatch, len(notes))
	}
	p := store.NoteArgs{Keep: MaxNotes, Notes: make([]store.NoteItem, 0, len(notes))}
	for _, n := range notes {
		if err := names.ValidateID(n.ID); err != nil {
			return nil, err
		}
		if n.Line == "" || strings.ContainsAny(n.Line, "\n\x00") || len(n.Line) > MaxErrorBytes {
			return nil, invalid("note", "one line without NUL, 1 to %d bytes", MaxErrorBytes)
		}
		p.Notes = append(p.Notes, store.NoteItem{ID: n.ID, Token: n.Token, Entry: n.Line})
	}
	res, err := call(ctx, c, store.Note, k, &p)
	if err != nil {
		return nil, fmt.Errorf("queue: notes in %s: %w", queue, err)
	}
	if len(res.Rows) != len(notes) {
		return nil, fmt.Errorf("queue: notes in %s: %w", queue, &store.ReplyError{Script: "note", Reply: res.Rows, Want: "a code a note"})
	}
	errs = make([]error, len(notes))
	for i := range res.Rows {
		code, err := store.Int("note", res.Rows, i, "code")
		if err != nil {
			return nil, fmt.Errorf("queue: notes in %s: %w", queue, err)
		}
		errs[i] = codeErr(code, queue, notes[i].ID)
	}
	return errs, nil
}

// Notes reads a job's notes, oldest first (none: nil).
func (in *inside) Notes(ctx context.Context, queue, id string) ([]string, error) {
	c := (*Client)(in)
	k, err := c.keysFor(queue)
	if err != nil {
		return nil, err
	}
	if err := names.ValidateID(id); err != nil {
		return nil, err
	}
	v, err := c.rdb.HGet(ctx, k.Data, store.NoteField(id)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("queue: notes of %s/%s: %w", queue, id, wrapRedis(err))
	}
	return strings.Split(v, "\n"), nil
}

// SettingPush is the queue's push target, JSON written and read by
// package dispatch.
const SettingPush = store.SettingPush
