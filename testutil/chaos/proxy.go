package chaos

import (
	"bytes"
	"github.com/chronoq/chronoq/internal/store"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// replyWait bounds how long a proxy waits for the reply it is to drop; a
// blocking command (XREADGROUP BLOCK) may not answer for a while: the connection is
// dropped anyway.
const replyWait = 200 * time.Millisecond

// Proxy is a loopback TCP proxy to one Redis that, while enabled, drops a
// connection at random moments: the next request forwarded after the moment
// is sent to Redis in full, and the connection is closed on both sides when
// the reply arrives, so the client never sees it. The command ran; the
// caller cannot know. That is the case go-redis retries, and the case every
// script must survive being run twice for. During a blackout every reply is
// dropped, so that go-redis's retries run out and the caller gets the error.
type Proxy struct {
	Name   string // the process it serves (a worker slot, "producer")
	Addr   string
	target string
	ln     net.Listener
	mean   time.Duration
	onDrop func(armed, dropped time.Time, command string)

	enabled  atomic.Bool
	nextDrop atomic.Int64 // unix ns of the next drop
	blackout atomic.Int64 // unix ns until which every reply is dropped

	mu     sync.Mutex
	rng    *rand.Rand
	conns  map[*proxyPair]struct{}
	closed bool
	wg     sync.WaitGroup
}

type proxyPair struct {
	client, server net.Conn
	drop           atomic.Bool // the reply under way is to be dropped
	armedAt        atomic.Int64
	command        atomic.Value // string: what the dropped request was
	once           sync.Once
}

// StartProxy listens on a free loopback port and forwards to target. A
// drop comes on average every mean (never sooner than mean/2 after the
// last) once enabled (it starts disabled: see SetEnabled); onDrop is told
// each one.
func StartProxy(name, target string, mean time.Duration, seed uint64, onDrop func(armed, dropped time.Time, command string)) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Name: name, Addr: ln.Addr().String(), target: target, ln: ln, mean: mean, onDrop: onDrop,
		rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), conns: map[*proxyPair]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// SetEnabled turns the drops on or off; turned on, the first drop is
// scheduled from now.
func (p *Proxy) SetEnabled(on bool) {
	if on {
		p.scheduleDrop()
	}
	p.enabled.Store(on)
}

// Blackout drops the reply of every request forwarded for d: more
// consecutive losses than go-redis retries, so errors reach the caller.
func (p *Proxy) Blackout(d time.Duration) { p.blackout.Store(time.Now().Add(d).UnixNano()) }

func (p *Proxy) scheduleDrop() {
	p.mu.Lock()
	gap := jitter(p.rng, p.mean)
	p.mu.Unlock()
	p.nextDrop.Store(time.Now().Add(gap).UnixNano())
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.client.Close()
		c.server.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			c.Close()
			continue
		}
		pair := &proxyPair{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns[pair] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.upstream(pair) })
		p.wg.Go(func() { p.downstream(pair) })
	}
}

// cut closes both sides of pair once, and counts it as a drop when it was
// one.
func (p *Proxy) cut(pair *proxyPair, dropped bool) {
	pair.once.Do(func() {
		pair.client.Close()
		pair.server.Close()
		p.mu.Lock()
		delete(p.conns, pair)
		p.mu.Unlock()
		if dropped && p.onDrop != nil {
			cmd, _ := pair.command.Load().(string)
			p.onDrop(time.Unix(0, pair.armedAt.Load()), time.Now(), cmd)
		}
	})
}

// upstream copies requests to Redis; after each one it may arm a drop.
func (p *Proxy) upstream(pair *proxyPair) {
	buf := make([]byte, 32<<10)
	for {
		n, err := pair.client.Read(buf)
		if n > 0 {
			if _, werr := pair.server.Write(buf[:n]); werr != nil {
				p.cut(pair, false)
				return
			}
			now := time.Now().UnixNano()
			arm := false
			if p.enabled.Load() && !pair.drop.Load() {
				if now < p.blackout.Load() {
					arm = true
				} else if next := p.nextDrop.Load(); now >= next && p.nextDrop.CompareAndSwap(next, next+int64(time.Hour)) {
					arm = true
					p.scheduleDrop()
				}
			}
			if arm {
				pair.armedAt.Store(now)
				pair.command.Store(CommandName(buf[:n]))
				pair.drop.Store(true)
				time.AfterFunc(replyWait, func() { p.cut(pair, true) })
			}
		}
		if err != nil {
			p.cut(pair, false)
			return
		}
	}
}

// downstream copies replies back, unless a drop is armed: then the reply
// is thrown away and the connection cut.
func (p *Proxy) downstream(pair *proxyPair) {
	buf := make([]byte, 32<<10)
	for {
		n, err := pair.server.Read(buf)
		if n > 0 {
			if pair.drop.Load() {
				p.cut(pair, true)
				return
			}
			if _, werr := pair.client.Write(buf[:n]); werr != nil {
				p.cut(pair, false)
				return
			}
		}
		if err != nil {
			p.cut(pair, pair.drop.Load())
			return
		}
	}
}

// CommandName names a request: the engine's script it runs (EVALSHA,
// EVAL or FCALL: see store.ScriptCalled), or else its command, in lower
// case.
func CommandName(req []byte) string {
	args := parseRESPArgs(req, 2) // the command and, for a script, its SHA1, body or function
	if len(args) == 0 {
		return "?"
	}
	if name, ok := store.ScriptCalled(args...); ok {
		return name
	}
	return strings.ToLower(args[0])
}

// parseRESPArgs reads up to limit bulk strings of the first RESP array in b.
func parseRESPArgs(b []byte, limit int) []string {
	line := func() (string, bool) {
		i := bytes.Index(b, []byte("\r\n"))
		if i < 0 {
			return "", false
		}
		l := string(b[:i])
		b = b[i+2:]
		return l, true
	}
	h, ok := line()
	if !ok || !strings.HasPrefix(h, "*") {
		return nil
	}
	n, _ := strconv.Atoi(h[1:])
	var out []string
	for range min(n, limit) {
		l, ok := line()
		if !ok || !strings.HasPrefix(l, "$") {
			return out
		}
		size, _ := strconv.Atoi(l[1:])
		if size < 0 || size > len(b) {
			return out
		}
		out = append(out, string(b[:size]))
		b = b[min(size+2, len(b)):]
	}
	return out
}
