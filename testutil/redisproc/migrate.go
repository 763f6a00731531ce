package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// MigrateOptions say which slot MigrateSlot moves, where, and how slowly.
type MigrateOptions struct {
	Slot int
	// From is the master serving the slot, To the master to receive it
	// (host:port, as the nodes know each other).
	From, To string
	// KeysPerStep is how many keys one MIGRATE moves (0: 10).
	KeysPerStep int
	// Pause is the wait after each step: the slot stays split between the
	// two masters for longer, as a large slot's would.
	Pause time.Duration
	// MigrateTimeout is MIGRATE's own timeout for one step's transfer (0:
	// 5 s).
	MigrateTimeout time.Duration
	// OnStep, if set, is called after each step with the number of keys
	// moved so far.
	OnStep func(moved int)
}

// Errors of MigrateSlot (wrapped).
var (
	// ErrKeyConflict: a key exists on both masters with different values.
	// MigrateSlot overwrites a copy on the target only when it equals the
	// source's (see MigrateSlot).
	ErrKeyConflict = errors.New("redisproc: key exists on both masters with different values")
	// ErrSlotOpen: MigrateSlot stopped with keys of the slot on both
	// masters, and left the slot MIGRATING on the source and IMPORTING on
	// the target, so that every key stays reachable (through ASK). Calling
	// MigrateSlot again with the same options finishes the move.
	ErrSlotOpen = errors.New("redisproc: slot left migrating")
)

// Bounds of MigrateSlot's own retries and waits.
const (
	migrateIOTries  = 3                      // an IOERR (timeout, connection) from MIGRATE is retried
	migrateIOPause  = 100 * time.Millisecond // after an IOERR
	agreementPoll   = 50 * time.Millisecond
	cleanupTimeout  = 10 * time.Second // stabilizing the slot after an error
	agreementBudget = 10 * time.Second // the cleanup's wait for every node to agree
)

// MigrateSlot moves hash slot o.Slot from master o.From to master o.To
// while clients keep using it, by hand and slowly, the way
// `redis-cli --cluster reshard` moves a slot:
//
//  1. CLUSTER SETSLOT <slot> IMPORTING <from-id> on the target, then
//     MIGRATING <to-id> on the source. From then on the source answers
//     ASK for a key it no longer has, the target serves a key of the slot
//     to a client that sent ASKING, and a multi-key command whose keys are
//     split (or partly missing) gets TRYAGAIN.
//  2. Steps, until the source has no key of the slot: CLUSTER
//     GETKEYSINSLOT <slot> <KeysPerStep> on the source, MIGRATE host port
//     "" 0 <timeout> KEYS k1..kn, OnStep, Pause.
//  3. CLUSTER SETSLOT <slot> NODE <to-id> on the target (which bumps its
//     config epoch, so that its claim wins), then on the source, then on
//     every other master; replicas follow their masters. Then it waits
//     until every node of the cluster names the target as the slot's
//     master and shows no migration mark for it.
//
// A key that MIGRATE finds on the target already (BUSYKEY: a MIGRATE that
// failed after the target had restored it, or a leftover) is not replaced
// blindly: as redis-cli does, MigrateSlot compares the two values (DUMP on
// both nodes) and moves the key with REPLACE only when they are equal;
// otherwise it stops with ErrKeyConflict, for a person to decide. An
// IOERR from MIGRATE is retried (at most 3 times; the keys it had not
// moved are still on the source).
//
// Calling it for a slot that is already being migrated from o.From to
// o.To resumes that migration; for a slot o.To already serves it only
// repeats step 3, which clears any mark left.
//
// ctx bounds the whole move. On an error, or when ctx ends, it leaves the
// slot stable whenever that moves no data: when the source holds none of
// the slot's keys (or step 3 had begun) it finishes the move; else, when
// the target holds none, it clears both marks, the target's first, and the
// slot stays with the source. With keys on both masters neither is
// possible without moving data, so it leaves both marks — every key stays
// reachable through ASK — and the error wraps ErrSlotOpen: call
// MigrateSlot again to finish. (Clearing the marks then would hide the
// target's keys; assigning the slot would make the source delete its own.)
// That cleanup runs under a bound of its own (10 s), after ctx has ended
// too, and the error says which way the slot went.
func MigrateSlot(ctx context.Context, o MigrateOptions) error {
	host, port, err := o.check()
	if err != nil {
		return err
	}
	o = o.withDefaults()
	m := &migration{o: o, host: host, port: port,
		src: dialAdmin(o.From, o.MigrateTimeout+doTimeout), dst: dialAdmin(o.To, doTimeout)}
	defer m.src.close()
	defer m.dst.close()
	if err := m.run(ctx); err != nil {
		return fmt.Errorf("redisproc: migrate slot %d from %s to %s: %w", o.Slot, o.From, o.To, err)
	}
	return nil
}

// withDefaults fills in KeysPerStep and MigrateTimeout when they are not
// positive.
func (o MigrateOptions) withDefaults() MigrateOptions {
	if o.KeysPerStep <= 0 {
		o.KeysPerStep = 10
	}
	if o.MigrateTimeout <= 0 {
		o.MigrateTimeout = 5 * time.Second
	}
	return o
}

// check refuses options that name no move (a slot out of range, the same
// master twice) or a target that is not host:port; it answers the
// target's host and port, for MIGRATE.
func (o MigrateOptions) check() (host, port string, err error) {
	if o.Slot < 0 || o.Slot >= Slots {
		return "", "", fmt.Errorf("redisproc: migrate: slot %d out of range", o.Slot)
	}
	if o.From == o.To {
		return "", "", fmt.Errorf("redisproc: migrate slot %d: source and target are both %s", o.Slot, o.From)
	}
	host, port, err = net.SplitHostPort(o.To)
	if err != nil {
		return "", "", fmt.Errorf("redisproc: migrate slot %d: target %q: %w", o.Slot, o.To, err)
	}
	return host, port, nil
}

// migration is one MigrateSlot under way.
type migration struct {
	o            MigrateOptions
	host, port   string
	src, dst     *admin
	srcID, dstID string
	view         []ClusterNode // the cluster as the source saw it at the start
	assigning    bool          // finish has begun: the target may own the slot already
}

// run makes the move (see MigrateSlot): it finds both masters, and moves
// the slot unless the target serves it already; a move that fails is
// stabilized.
func (m *migration) run(ctx context.Context) error {
	done, err := m.locate(ctx)
	if err != nil {
		return err
	}
	if done {
		return m.finish(ctx) // moved already, but a mark may remain
	}
	if err := m.move(ctx); err != nil {
		return m.stabilize(ctx, err)
	}
	return nil
}

// locate reads the cluster as the source sees it: both masters' ids, and
// who serves the slot. It answers done when the target serves it
// already, and an error when the source does not.
func (m *migration) locate(ctx context.Context) (done bool, err error) {
	view, err := m.src.nodes(ctx)
	if err != nil {
		return false, err
	}
	for _, n := range view {
		switch n.Addr {
		case m.o.From:
			m.srcID = n.ID
		case m.o.To:
			m.dstID = n.ID
		}
	}
	if m.srcID == "" || m.dstID == "" {
		return false, fmt.Errorf("%s does not know both nodes", m.o.From)
	}
	m.view = view
	switch owner, ok := OwnerOf(view, m.o.Slot); {
	case ok && owner.ID == m.dstID:
		return true, nil
	case !ok || owner.ID != m.srcID:
		return false, fmt.Errorf("%s does not serve the slot (its master is %q)", m.o.From, owner.Addr)
	}
	return false, nil
}

// move is steps 1 to 3 of MigrateSlot: mark the slot, move its keys step
// by step, assign it.
func (m *migration) move(ctx context.Context) error {
	if _, err := m.dst.do(ctx, "CLUSTER", "SETSLOT", m.o.Slot, "IMPORTING", m.srcID); err != nil {
		return err
	}
	if _, err := m.src.do(ctx, "CLUSTER", "SETSLOT", m.o.Slot, "MIGRATING", m.dstID); err != nil {
		return err
	}
	if err := m.moveKeys(ctx); err != nil {
		return err
	}
	return m.finish(ctx)
}

// moveKeys moves the slot's keys, KeysPerStep a step, until the source has
// none left; after each step it calls OnStep, then pauses.
func (m *migration) moveKeys(ctx context.Context) error {
	moved := 0
	for {
		v, err := m.src.do(ctx, "CLUSTER", "GETKEYSINSLOT", m.o.Slot, m.o.KeysPerStep)
		if err != nil {
			return err
		}
		keys := asStrings(v)
		if len(keys) == 0 {
			return nil
		}
		n, err := m.migrate(ctx, keys)
		if err != nil {
			return err
		}
		moved += n
		if m.o.OnStep != nil {
			m.o.OnStep(moved)
		}
		if m.o.Pause > 0 && !Sleep(ctx, m.o.Pause) {
			return ctx.Err()
		}
	}
}

// migrate moves keys from the source to the target: one MIGRATE, retried
// on IOERR; on BUSYKEY, key by key (see MigrateSlot). It answers how many
// keys it moved, as far as it can tell (a key gone meanwhile is not
// counted when MIGRATE says NOKEY).
func (m *migration) migrate(ctx context.Context, keys []string) (int, error) {
	var err error
	for try := range migrateIOTries + 1 {
		if try > 0 && !Sleep(ctx, migrateIOPause) {
			return 0, ctx.Err()
		}
		var v any
		v, err = m.src.do(ctx, m.migrateArgs(false, keys...)...)
		switch {
		case err == nil && AsString(v) == "NOKEY":
			return 0, nil
		case err == nil:
			return len(keys), nil
		case strings.Contains(err.Error(), "BUSYKEY"):
			return m.migrateOneByOne(ctx, keys)
		case strings.Contains(err.Error(), "IOERR"):
			continue // the keys not moved are still on the source: GETKEYSINSLOT lists them again
		default:
			return 0, err
		}
	}
	return 0, err
}

// migrateOneByOne moves keys one MIGRATE each; a key the target has
// already moves with REPLACE only when both copies are equal.
func (m *migration) migrateOneByOne(ctx context.Context, keys []string) (int, error) {
	moved := 0
	for _, k := range keys {
		v, err := m.src.do(ctx, m.migrateArgs(false, k)...)
		if err != nil && strings.Contains(err.Error(), "BUSYKEY") {
			if err = m.sameOnBoth(ctx, k); err == nil {
				v, err = m.src.do(ctx, m.migrateArgs(true, k)...)
			}
		}
		if err != nil {
			return moved, err // an IOERR too: the next step lists the key again
		}
		if AsString(v) == "OK" {
			moved++
		}
	}
	return moved, nil
}

// sameOnBoth checks that key has the same value on the source and the
// target (equal DUMP payloads). A key gone from either side meanwhile
// counts as the same: MIGRATE then answers NOKEY, or finds no key to
// replace.
func (m *migration) sameOnBoth(ctx context.Context, key string) error {
	a, err := m.src.do(ctx, "DUMP", key)
	if _, ask := redis.IsAskError(err); ask {
		return nil // gone from the source: the target's copy is the key now
	}
	if err != nil {
		return err
	}
	b, err := m.dst.asking(ctx, "DUMP", key)
	if err != nil {
		return err
	}
	if a == nil || b == nil || AsString(a) == AsString(b) {
		return nil
	}
	return fmt.Errorf("%w: %q (on %s and %s)", ErrKeyConflict, key, m.o.From, m.o.To)
}

func (m *migration) migrateArgs(replace bool, keys ...string) []any {
	args := []any{"MIGRATE", m.host, m.port, "", 0, m.o.MigrateTimeout.Milliseconds()}
	if replace {
		args = append(args, "REPLACE")
	}
	args = append(args, "KEYS")
	for _, k := range keys {
		args = append(args, k)
	}
	return args
}

// finish assigns the slot to the target: on the target first, then the
// source (which refuses while it still holds a key of the slot), then
// every other master; then it waits until every node agrees. A master
// other than the two that does not answer is left to learn it by gossip
// (the target's epoch was bumped); the wait for agreement covers it.
func (m *migration) finish(ctx context.Context) error {
	m.assigning = true
	for _, a := range []*admin{m.dst, m.src} {
		if _, err := a.do(ctx, "CLUSTER", "SETSLOT", m.o.Slot, "NODE", m.dstID); err != nil {
			return err
		}
	}
	for _, n := range m.view {
		if !n.Master || n.Failed || n.ID == m.srcID || n.ID == m.dstID {
			continue
		}
		a := dialAdmin(n.Addr, doTimeout)
		_, _ = a.do(ctx, "CLUSTER", "SETSLOT", m.o.Slot, "NODE", m.dstID)
		a.close()
	}
	return m.waitAgreement(ctx)
}

// waitAgreement waits until every node of the cluster that is not failed
// names the target as the slot's master and has no migration mark for it.
func (m *migration) waitAgreement(ctx context.Context) error {
	for {
		problem := m.disagreement(ctx)
		if problem == "" {
			return nil
		}
		if !Sleep(ctx, agreementPoll) {
			return fmt.Errorf("nodes do not agree that %s serves the slot: %s", m.o.To, problem)
		}
	}
}

// disagreement is "" when every node agrees that the target serves the
// slot, and no node marks it migrating or importing; else the first
// problem found.
func (m *migration) disagreement(ctx context.Context) string {
	view, err := m.src.nodes(ctx)
	if err != nil {
		return err.Error()
	}
	for _, n := range view {
		if n.Failed {
			continue
		}
		a := dialAdmin(n.Addr, doTimeout)
		nodes, err := a.nodes(ctx)
		a.close()
		if err != nil {
			return err.Error()
		}
		owner, ok := OwnerOf(nodes, m.o.Slot)
		if !ok || owner.ID != m.dstID {
			return fmt.Sprintf("%s names %q", n.Addr, owner.Addr)
		}
		for _, x := range nodes {
			if x.Myself && (x.Migrating[m.o.Slot] != "" || x.Importing[m.o.Slot] != "") {
				return n.Addr + " still marks the slot migrating or importing"
			}
		}
	}
	return ""
}

// stabilize runs after a failed migration step (see MigrateSlot): it
// answers cause, wrapped with what became of the slot.
func (m *migration) stabilize(ctx context.Context, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	open := func(why string, args ...any) error {
		return fmt.Errorf("%w; %w: %s", cause, ErrSlotOpen, fmt.Sprintf(why, args...))
	}
	nsrc, err := m.src.countKeys(ctx, m.o.Slot)
	if err != nil {
		return open("%v", err)
	}
	ndst, err := m.dst.countKeys(ctx, m.o.Slot)
	if err != nil {
		return open("%v", err)
	}
	switch {
	case m.assigning || nsrc == 0:
		ctx, cancel := context.WithTimeout(ctx, agreementBudget)
		defer cancel()
		if err := m.finish(ctx); err != nil {
			return fmt.Errorf("%w; every key had moved, but assigning the slot failed: %w", cause, err)
		}
		return fmt.Errorf("%w; every key had moved: the slot now belongs to %s", cause, m.o.To)
	case ndst == 0:
		// Back to the source, the target first: from then on it answers
		// a client sent to it by ASK with MOVED (back to the source), so
		// no key can appear on it; one that appeared before is found by
		// the count that follows, and the mark is put back.
		if _, err := m.dst.do(ctx, "CLUSTER", "SETSLOT", m.o.Slot, "STABLE"); err != nil {
			return open("%v", err)
		}
		if n, err := m.dst.countKeys(ctx, m.o.Slot); err != nil || n > 0 {
			_, _ = m.dst.do(ctx, "CLUSTER", "SETSLOT", m.o.Slot, "IMPORTING", m.srcID)
			return open("a key reached %s while the move was undone", m.o.To)
		}
		if _, err := m.src.do(ctx, "CLUSTER", "SETSLOT", m.o.Slot, "STABLE"); err != nil {
			return fmt.Errorf("%w; no key had moved, but the source keeps its MIGRATING mark: %w", cause, err)
		}
		return fmt.Errorf("%w; no key had moved: the slot stays with %s", cause, m.o.From)
	default:
		return open("%d keys on %s, %d on %s", nsrc, m.o.From, ndst, m.o.To)
	}
}

func asStrings(v any) []string {
	vs, _ := v.([]any)
	out := make([]string, 0, len(vs))
	for _, x := range vs {
		out = append(out, AsString(x))
	}
	return out
}

// Sleep waits d or until ctx ends (false).
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
