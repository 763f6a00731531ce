package redisproc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Slots is the number of Redis Cluster hash slots.
const Slots = 16384

// KeySlot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of the
// key's hash tag — the bytes between its first '{' and the first '}' after
// it, when there are any — or of the whole key, modulo 16384. It answers
// what CLUSTER KEYSLOT does, without asking a server (go-redis keeps its
// own in an internal package).
func KeySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % Slots)
}

// crc16 is CRC-16/XMODEM: polynomial 0x1021, initial value 0, no
// reflection, no final xor (what Redis Cluster specifies).
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// ClusterNode is one line of CLUSTER NODES.
type ClusterNode struct {
	ID, Addr string // Addr is host:port, without the bus port
	MasterID string // "-" for a master
	Myself   bool   // the line of the node that answered
	Master   bool
	Failed   bool // flagged fail or fail? (or noaddr)
	Slots    [][2]int
	// Migrating and Importing are the slots the node is moving out (to the
	// node id) and in (from the node id). A node shows them on its own line
	// only.
	Migrating, Importing map[int]string
}

// Serves reports whether the node's line assigns it slot.
func (n ClusterNode) Serves(slot int) bool {
	for _, r := range n.Slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

// ParseClusterNodes reads the reply of CLUSTER NODES.
func ParseClusterNodes(s string) []ClusterNode {
	var out []ClusterNode
	for line := range strings.Lines(s) {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		flags := "," + f[2] + ","
		n := ClusterNode{ID: f[0], Addr: addr, MasterID: f[3],
			Myself: strings.Contains(flags, ",myself,"), Master: strings.Contains(flags, ",master,"),
			Failed: strings.Contains(flags, ",fail,") || strings.Contains(flags, ",fail?,") || strings.Contains(flags, ",noaddr,")}
		for _, r := range f[8:] {
			if mark, ok := strings.CutPrefix(r, "["); ok {
				mark = strings.TrimSuffix(mark, "]")
				if s, id, ok := strings.Cut(mark, "->-"); ok {
					n.Migrating = addMark(n.Migrating, s, id)
				} else if s, id, ok := strings.Cut(mark, "-<-"); ok {
					n.Importing = addMark(n.Importing, s, id)
				}
				continue
			}
			lo, hi, ok := strings.Cut(r, "-")
			a, err := strconv.Atoi(lo)
			if err != nil {
				continue
			}
			b := a
			if ok {
				if b, err = strconv.Atoi(hi); err != nil {
					continue
				}
			}
			n.Slots = append(n.Slots, [2]int{a, b})
		}
		out = append(out, n)
	}
	return out
}

func addMark(m map[int]string, slot, id string) map[int]string {
	s, err := strconv.Atoi(slot)
	if err != nil {
		return m
	}
	if m == nil {
		m = map[int]string{}
	}
	m[s] = id
	return m
}

// OwnerOf answers the healthy master that nodes assign slot to.
func OwnerOf(nodes []ClusterNode, slot int) (ClusterNode, bool) {
	for _, n := range nodes {
		if n.Master && !n.Failed && n.Serves(slot) {
			return n, true
		}
	}
	return ClusterNode{}, false
}

// ClusterNodes is CLUSTER NODES as the node at addr sees the cluster.
func ClusterNodes(addr string) ([]ClusterNode, error) {
	v, err := Do(addr, "CLUSTER", "NODES")
	if err != nil {
		return nil, fmt.Errorf("redisproc: CLUSTER NODES on %s: %w", addr, err)
	}
	return ParseClusterNodes(AsString(v)), nil
}

// SlotOwner answers the master that serves slot as the node at addr sees
// it.
func SlotOwner(addr string, slot int) (ClusterNode, error) {
	nodes, err := ClusterNodes(addr)
	if err != nil {
		return ClusterNode{}, err
	}
	n, ok := OwnerOf(nodes, slot)
	if !ok {
		return ClusterNode{}, fmt.Errorf("redisproc: %s knows no master serving slot %d", addr, slot)
	}
	return n, nil
}

// NodeID is the cluster node id of the node at addr (CLUSTER MYID).
func NodeID(addr string) (string, error) {
	v, err := Do(addr, "CLUSTER", "MYID")
	if err != nil {
		return "", fmt.Errorf("redisproc: CLUSTER MYID on %s: %w", addr, err)
	}
	return AsString(v), nil
}

// NodeIDs maps the address of every node the node at addr knows to its id.
func NodeIDs(addr string) (map[string]string, error) {
	nodes, err := ClusterNodes(addr)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(nodes))
	for _, n := range nodes {
		out[n.Addr] = n.ID
	}
	return out, nil
}

// admin is one connection to one node for a sequence of administrative
// commands: no pool, no retries, no redirects, every command bounded by
// the caller's context (and by the read timeout).
type admin struct {
	addr string
	rdb  *redis.Client
}

func dialAdmin(addr string, readTimeout time.Duration) *admin {
	return &admin{addr: addr, rdb: redis.NewClient(&redis.Options{
		Addr: addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1, PoolSize: 1,
		DialTimeout: doTimeout, ReadTimeout: readTimeout, WriteTimeout: doTimeout,
		ContextTimeoutEnabled: true,
	})}
}

func (a *admin) close() { _ = a.rdb.Close() }

// do sends one command; a nil reply is nil, an error reply an error that
// names the node.
func (a *admin) do(ctx context.Context, args ...any) (any, error) {
	v, err := a.rdb.Do(ctx, args...).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s on %s: %w", cmdName(args), a.addr, err)
	}
	return v, nil
}

// asking sends ASKING and then one command on the same connection, so that
// a node importing a slot serves the command for a key of it.
func (a *admin) asking(ctx context.Context, args ...any) (any, error) {
	pipe := a.rdb.Pipeline()
	pipe.Do(ctx, "ASKING")
	cmd := pipe.Do(ctx, args...)
	_, _ = pipe.Exec(ctx)
	v, err := cmd.Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ASKING %s on %s: %w", cmdName(args), a.addr, err)
	}
	return v, nil
}

func (a *admin) nodes(ctx context.Context) ([]ClusterNode, error) {
	v, err := a.do(ctx, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	return ParseClusterNodes(AsString(v)), nil
}

func (a *admin) countKeys(ctx context.Context, slot int) (int64, error) {
	v, err := a.do(ctx, "CLUSTER", "COUNTKEYSINSLOT", slot)
	n, _ := v.(int64)
	return n, err
}

// cmdName is the command of args, and its subcommand for CLUSTER, for
// messages.
func cmdName(args []any) string {
	if len(args) == 0 {
		return ""
	}
	s := strings.ToUpper(fmt.Sprint(args[0]))
	if s == "CLUSTER" && len(args) > 1 {
		s += " " + strings.ToUpper(fmt.Sprint(args[1]))
	}
	return s
}
