// Package localredis runs the Redis `chronoq serve` uses when it is told of
// none (no --redis-url, no --redis-cluster): the zero-setup default.
//
// It exists so that the first run keeps what it acknowledged. A job queue
// whose default loses every job at a restart contradicts its own promise,
// so the default keeps its data in a directory of its own
// ($XDG_STATE_HOME/chronoq, ~/.local/state/chronoq when unset), in one of
// two forms:
//
//   - redis-server, when one is on the PATH (or named): started as a child
//     of serve (package internal/childproc: it dies with serve, however
//     serve dies) with an append-only file fsynced at every write, on a
//     unix socket in the data directory (on loopback with a password when
//     the socket's path is too long), and stopped with serve. What was
//     acknowledged survives a restart, a kill -9 and a crash.
//   - embedded, otherwise: the in-process Redis (miniredis), saved to a
//     snapshot in the data directory when serve stops and loaded when it
//     starts. A graceful stop keeps everything; a crash loses what changed
//     since the start.
//
// A third form, memory, is the embedded one keeping nothing: the demo's
// default. A lock file keeps two processes from sharing one directory.
package localredis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/chronoq/chronoq/internal/childproc"
)

// The forms a local Redis takes (Redis.Form), and the values of
// Config.Server that ask for one.
const (
	FormServer   = "redis-server" // a redis-server child with an append-only file
	FormEmbedded = "embedded"     // the in-process Redis, saved to a snapshot on stop
	FormMemory   = "memory"       // the in-process Redis, keeping nothing
)

// Config says which local Redis to run, and where it keeps its data.
type Config struct {
	// Dir is the data directory, created (0700) when missing. Not needed
	// for FormMemory.
	Dir string
	// Server is "" (redis-server when one is on the PATH, else embedded),
	// FormEmbedded, FormMemory, or the path (or name on the PATH) of a
	// redis-server binary to run.
	Server string
	// StartTimeout bounds how long a redis-server may take to answer,
	// loading its append-only file included; 0 means DefaultStartTimeout.
	StartTimeout time.Duration
}

// DefaultStartTimeout is Config.StartTimeout's default.
const DefaultStartTimeout = 2 * time.Minute

// stopGrace is how long a redis-server has to exit after SIGTERM before
// it is killed (its file is fsynced at every write: nothing is lost then).
const stopGrace = 10 * time.Second

// maxSocketPath is the longest unix socket path used (sun_path holds 108
// bytes on Linux, 104 elsewhere); a longer one falls back to loopback.
const maxSocketPath = 100

// Redis is a running local Redis.
type Redis struct {
	Form   string // FormServer, FormEmbedded or FormMemory
	Dir    string // the data directory ("" for FormMemory)
	Binary string // the redis-server run (FormServer)
	// Where its data is: the append-only directory (FormServer) or the
	// snapshot file (FormEmbedded); "" for FormMemory.
	DataPath string
	// Other notes for the log: data of the other form left in Dir.
	Notes []string

	opts  redis.Options
	child *childproc.Child
	mini  *miniredis.Miniredis
	lock  *os.File
	// ticking ends the embedded Redis's clock of key expiry (see tick).
	ticking chan struct{}
	ticked  chan struct{}
}

// tickEvery is how often the embedded Redis's keys age (see tick).
const tickEvery = time.Second

// tick makes the embedded Redis's TTLs run in real time: miniredis counts
// a key's TTL down only when told time passed (FastForward), so without
// it a key given a TTL (a workflow's, kept for its retention) would never
// expire.
func (r *Redis) tick() {
	r.ticking, r.ticked = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(r.ticked)
		t := time.NewTicker(tickEvery)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-r.ticking:
				return
			case now := <-t.C:
				r.mini.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
}

// Options are the go-redis options that reach it.
func (r *Redis) Options() *redis.Options {
	o := r.opts
	return &o
}

// Addr is where it listens: a unix socket's path or host:port.
func (r *Redis) Addr() string { return r.opts.Addr }

// Exited is closed when a redis-server child exited on its own before
// Close (nil for the embedded forms).
func (r *Redis) Exited() <-chan struct{} {
	if r.child == nil {
		return nil
	}
	return r.child.Done()
}

// DefaultDir is the data directory for an environment read by getenv:
// $XDG_STATE_HOME/chronoq, or $HOME/.local/state/chronoq when
// XDG_STATE_HOME is unset (or not absolute, as the XDG spec says to ignore).
func DefaultDir(getenv func(string) string) (string, error) {
	if x := getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "chronoq"), nil
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("neither XDG_STATE_HOME nor HOME is set: name a data directory (--data-dir or CHRONOQ_DATA_DIR)")
	}
	return filepath.Join(home, ".local", "state", "chronoq"), nil
}

// Start runs the local Redis cfg asks for, and answers once it answers.
func Start(ctx context.Context, cfg Config) (*Redis, error) {
	if cfg.Server == FormMemory {
		return startMemory()
	}
	if cfg.Dir == "" {
		return nil, errors.New("localredis: no data directory")
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	bin := ""
	switch cfg.Server {
	case FormEmbedded:
	case "":
		bin, _ = exec.LookPath("redis-server") // none: embedded
	default:
		p, err := exec.LookPath(cfg.Server)
		if err != nil {
			return nil, fmt.Errorf("localredis: redis-server binary %q: %w", cfg.Server, err)
		}
		bin = p
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("localredis: data directory %q: %w", cfg.Dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("localredis: data directory: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	var r *Redis
	if bin != "" {
		r, err = startServer(ctx, dir, bin, cfg.StartTimeout)
	} else {
		r, err = startEmbedded(dir)
	}
	if err != nil {
		unlockDir(lock)
		return nil, err
	}
	r.lock = lock
	return r, nil
}

// Close stops it: a redis-server child is stopped (SIGTERM, then SIGKILL
// after a grace), the embedded Redis saved to its snapshot; then the data
// directory's lock is released.
func (r *Redis) Close() error {
	var err error
	switch {
	case r.child != nil:
		err = r.child.Stop(stopGrace)
	case r.mini != nil:
		close(r.ticking)
		<-r.ticked
		if r.Form == FormEmbedded {
			err = saveSnapshot(r.mini, r.DataPath)
		}
		r.mini.Close()
	}
	if r.lock != nil {
		unlockDir(r.lock)
	}
	return err
}

// lockDir takes the data directory's lock (an exclusive lock on the file
// "lock", which holds the owner's pid): one process a directory. The
// kernel releases it when the process ends, however it ends.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600) //nolint:gosec // G304: the data directory's lock file
	if err != nil {
		return nil, fmt.Errorf("localredis: lock file: %w", err)
	}
	// A write lock (fcntl) on the whole file, released when the process
	// ends however it ends (see setLock).
	lk := syscall.Flock_t{Type: syscall.F_WRLCK}
	if err := syscall.FcntlFlock(f.Fd(), setLock, &lk); err != nil {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		_ = f.Close()
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) {
			return nil, fmt.Errorf("data directory %s is in use by another chronoq (pid %s): stop it, or give this one another --data-dir",
				dir, strings.TrimSpace(string(b[:n])))
		}
		return nil, fmt.Errorf("localredis: lock %s: %w", path, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}

// unlockDir releases lockDir's lock, then closes its file. The lock is
// released explicitly, not by the close alone: a child process forked
// meanwhile (another goroutine starting a program) shares the open file
// until it execs, and the lock would be held that long.
func unlockDir(f *os.File) {
	lk := syscall.Flock_t{Type: syscall.F_UNLCK}
	_ = syscall.FcntlFlock(f.Fd(), setLock, &lk)
	_ = f.Close()
}

func randomPassword() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startMemory starts the embedded Redis keeping nothing.
func startMemory() (*Redis, error) {
	m := miniredis.NewMiniRedis()
	pw := randomPassword()
	m.RequireAuth(pw) // on loopback, but not for other local users
	if err := m.Start(); err != nil {
		return nil, fmt.Errorf("localredis: start the embedded Redis: %w", err)
	}
	r := &Redis{Form: FormMemory, mini: m, opts: redis.Options{Addr: m.Addr(), Password: pw}}
	r.tick()
	return r, nil
}

// startEmbedded starts the embedded Redis with what its snapshot in dir
// holds.
func startEmbedded(dir string) (*Redis, error) {
	m := miniredis.NewMiniRedis()
	path := filepath.Join(dir, "embedded.snapshot")
	if err := loadSnapshot(m, path); err != nil {
		return nil, err
	}
	pw := randomPassword()
	m.RequireAuth(pw)
	if err := m.Start(); err != nil {
		return nil, fmt.Errorf("localredis: start the embedded Redis: %w", err)
	}
	r := &Redis{Form: FormEmbedded, Dir: dir, DataPath: path, mini: m, opts: redis.Options{Addr: m.Addr(), Password: pw}}
	r.tick()
	if _, err := os.Stat(filepath.Join(dir, "redis", "appendonlydir")); err == nil {
		r.Notes = append(r.Notes, "the data directory also holds a redis-server's append-only file (redis/), which the embedded Redis does not read")
	}
	return r, nil
}

// startServer starts redis-server bin on dir's data and waits until it
// answers.
func startServer(ctx context.Context, dir, bin string, timeout time.Duration) (*Redis, error) {
	work := filepath.Join(dir, "redis")
	if err := os.MkdirAll(work, 0o700); err != nil {
		return nil, fmt.Errorf("localredis: %w", err)
	}
	r := &Redis{Form: FormServer, Dir: dir, Binary: bin, DataPath: filepath.Join(work, "appendonlydir")}
	if fi, err := os.Stat(filepath.Join(dir, "embedded.snapshot")); err == nil && fi.Size() > 0 {
		r.Notes = append(r.Notes, "the data directory also holds the embedded Redis's snapshot (embedded.snapshot), which redis-server does not read")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A config file (0600), not arguments: a password in arguments is
	// visible to every local user.
	conf := []string{
		"daemonize no",
		"dir " + quote(work),
		"appendonly yes",
		"appendfsync always",
		`save ""`,
		"logfile " + quote(""),
		"protected-mode yes",
	}
	sock := filepath.Join(dir, "redis.sock")
	var lastErr error
	for range 3 { // a port taken between choosing and binding: another try
		opts := redis.Options{DialerRetries: 2}
		c := conf
		if len(sock) <= maxSocketPath {
			c = append(c, "port 0", "unixsocket "+quote(sock), "unixsocketperm 700")
			opts.Network, opts.Addr = "unix", sock
		} else {
			port, err := freePort()
			if err != nil {
				return nil, err
			}
			pw := randomPassword()
			c = append(c, "bind 127.0.0.1", "port "+strconv.Itoa(port), "requirepass "+pw)
			opts.Addr, opts.Password = net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), pw
		}
		confPath := filepath.Join(work, "redis.conf")
		if err := os.WriteFile(confPath, []byte(strings.Join(c, "\n")+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("localredis: %w", err)
		}
		logPath := filepath.Join(work, "redis.log")
		child, err := childproc.Start(bin, []string{confPath}, work, logPath)
		if err != nil {
			return nil, err
		}
		if err := waitReady(ctx, child, &opts); err != nil {
			_ = child.Stop(stopGrace)
			lastErr = fmt.Errorf("localredis: %s on %s: %w%s", bin, dir, err, logTail(logPath))
			if opts.Network == "unix" || ctx.Err() != nil {
				return nil, lastErr
			}
			continue
		}
		r.child, r.opts = child, opts
		return r, nil
	}
	return nil, lastErr
}

// quote writes s as a redis.conf argument.
func quote(s string) string { return strconv.Quote(s) }

// waitReady waits until the server answers PING (not LOADING), the child
// exits, or ctx ends.
func waitReady(ctx context.Context, child *childproc.Child, opts *redis.Options) error {
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	network := opts.Network
	if network == "" {
		network = "tcp"
	}
	for {
		// Dialed first by hand: go-redis logs every failed dial.
		conn, err := net.DialTimeout(network, opts.Addr, time.Second)
		if err == nil {
			_ = conn.Close()
			if err = rdb.Ping(ctx).Err(); err == nil {
				return nil
			}
		}
		select {
		case <-child.Done():
			return errors.Join(errors.New("exited at start"), child.Err())
		case <-ctx.Done():
			return fmt.Errorf("no answer in time: %w", err)
		case <-t.C:
		}
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("localredis: a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// logTail is the end of the child's log, to quote in an error.
func logTail(path string) string {
	b, err := os.ReadFile(path) //nolint:gosec // G304: the child's log in the data directory
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return "\n" + path + ":\n" + string(b)
}
