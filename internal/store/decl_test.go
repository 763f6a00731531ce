package store

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// Argv fills ARGV by the declared names: the common arguments, the fixed
// ones in the order of the spec (and of the prelude's A_ names), the
// batch's count and its groups.
func TestArgvFollowsTheDeclaration(t *testing.T) {
	t.Parallel()
	c := Common{OffsetUs: 7, Pubcmd: "PUBLISH", Channel: "ch", Lsets: "s1"}
	argv := Complete.Argv(c, &CompleteArgs{RetentionMs: 100, History: 5, TombMs: 60, Answer: true,
		Acks: []CompleteItem{{ID: "a", Token: "t1", Result: "{}", Artifacts: ""}, {ID: "b", Token: "t2", Result: "1", Artifacts: "x"}}})
	require.Equal(t, []any{int64(7), "PUBLISH", "ch", "s1", int64(100), int64(5), int64(60), "1", 2, "a", "t1", "{}", "", "b", "t2", "1", "x"}, argv)
	require.Equal(t, []string{"retention_ms", "history", "tomb_ms", "answer", "n", "id", "token", "result", "artifacts"}, Complete.spec.args)
	require.Equal(t, 4+4+1, Complete.spec.fixedArgs())
	require.Equal(t, 4, Complete.spec.groupSize())
	argv = Heartbeat.Argv(Common{}, &HeartbeatArgs{ID: "j", Token: "t", ExtendMs: 500, Progress: "p"})
	require.Equal(t, []any{int64(0), "", "", "", "j", "t", int64(500), "p"}, argv)
	require.Len(t, argv, Heartbeat.spec.fixedArgs())
}

// A reply is read through its declaration: each element checked, a
// missing or mistyped one an error naming the script and the element.
func TestReplyIsReadThroughItsDeclaration(t *testing.T) {
	t.Parallel()
	r, err := Heartbeat.Reply([]any{int64(1), int64(1234), int64(0)})
	require.NoError(t, err)
	require.Equal(t, HeartbeatReply{Code: 1, LeaseUntilMs: 1234}, r)

	var re *ReplyError
	_, err = Heartbeat.Reply([]any{int64(1), "1234", int64(0)})
	require.True(t, errors.As(err, &re), "%v", err)
	require.Equal(t, "heartbeat", re.Script)
	require.Equal(t, "lease_until_ms", re.Field)
	require.ErrorContains(t, err, "heartbeat.lua")

	_, err = Heartbeat.Reply([]any{int64(1), int64(1234)})
	require.True(t, errors.As(err, &re))
	require.Equal(t, "cancel_requested", re.Field)

	_, err = Heartbeat.Reply([]any{int64(1), int64(1234), int64(0), int64(9)})
	require.ErrorAs(t, err, &re, "an element the declaration does not name")

	_, err = Heartbeat.Reply(int64(1))
	require.ErrorAs(t, err, &re, "not an array")

	c, err := Release.Reply(int64(2))
	require.NoError(t, err)
	require.Equal(t, int64(2), c.Code)
	_, err = Release.Reply("2")
	require.ErrorAs(t, err, &re, "a scalar of another type")

	cl, err := Claim.Reply([]any{"L123", "", int64(99), "0,5", "j1", "j2"})
	require.NoError(t, err)
	require.Equal(t, ClaimReply{Paused: "L123", Next: "", NowUs: 99, Starts: "0,5", Jobs: []any{"j1", "j2"}}, cl)

	w, err := Wait.Reply([]any{int64(0), int64(3)})
	require.NoError(t, err)
	require.Nil(t, w.At, "an optional element that is absent")
	w, err = Wait.Reply([]any{int64(0), int64(0), "17"})
	require.NoError(t, err)
	require.Equal(t, "17", w.At)
}

// The marks reply() wraps around a reply are taken off, checked.
func TestUnwrapMarks(t *testing.T) {
	t.Parallel()
	v, m, err := UnwrapMarks("release", []any{Sentinel, int64(5), int64(6), int64(7), int64(1), int64(8)})
	require.NoError(t, err)
	require.Equal(t, int64(1), v)
	require.Equal(t, Marks{DueMs: 5, SweepMs: 6, Seq: 7, WFMs: 8}, m)
	v, m, err = UnwrapMarks("release", int64(1))
	require.NoError(t, err)
	require.Equal(t, int64(1), v)
	require.Zero(t, m)
	_, _, err = UnwrapMarks("release", []any{Sentinel, "5", int64(6), int64(7), int64(1)})
	var re *ReplyError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "due mark", re.Field)
}

// declare refuses a params or reply type it cannot fill or read.
func TestDeclareRefusesUndeclaredFields(t *testing.T) {
	t.Parallel()
	type untagged struct{ X string }
	type badKind struct {
		X []string `arg:"x"`
	}
	type badReply struct {
		X float64 `reply:"x"`
	}
	sc := &Script{items: -1}
	require.Panics(t, func() { sc.resolveArgs("t", typeOf[untagged]()) })
	require.Panics(t, func() { sc.resolveArgs("t", typeOf[badKind]()) })
	require.Panics(t, func() { sc.resolveReply("t", typeOf[badReply]()) })
	require.Panics(t, func() { sc.resolveReply("t", typeOf[untagged]()) })
}

// A global script's ARGV has no common arguments: cron_advance.lua reads
// its offset, the count of moves and four values a move.
func TestCronArgvAndReply(t *testing.T) {
	t.Parallel()
	argv := CronAdvance.Argv(Common{OffsetUs: 99}, &CronAdvanceArgs{OffsetUs: 5,
		Moves: []CronAdvanceItem{{Name: "a", Version: "3", ThroughMs: 1000, Cursor: "2000"}, {Name: "b", Version: "4", ThroughMs: 1500}}})
	require.Equal(t, []any{int64(5), 2, "a", "3", int64(1000), "2000", "b", "4", int64(1500), ""}, argv)
	require.Contains(t, scriptSource(CronAdvance.spec), "local K_versions = KEYS[1]\nlocal K_due = KEYS[2]\n")

	r, err := CronDue.Reply([]any{int64(7), "", int64(2), int64(2), "e", "1000", "3", "{}"})
	require.NoError(t, err)
	require.Equal(t, CronDueReply{NowUs: 7, Entries: 2, Versions: 2, Rows: []any{"e", "1000", "3", "{}"}}, r)
	var re *ReplyError
	_, err = CronDue.Reply([]any{int64(7), "", "2", int64(2)})
	require.ErrorAs(t, err, &re)
	require.Equal(t, "cron_due", re.Script)
	require.Equal(t, "entries", re.Field)

	p, err := CronPut.Reply([]any{"full", int64(10)})
	require.NoError(t, err)
	require.Equal(t, CronPutReply{Status: "full", N: 10}, p)
	p, err = CronPut.Reply([]any{"created"})
	require.NoError(t, err)
	require.Equal(t, "created", p.Status)
}
