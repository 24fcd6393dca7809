package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is one redis-server process. Kill and Restart are safe for
// concurrent use.
type Server struct {
	tb         testing.TB
	bin        string
	port       int
	persistent bool
	snapshots  bool
	cluster    bool
	dir        string // the data directory of a persistent or snapshots server

	mu     sync.Mutex
	cmd    *exec.Cmd     // nil while killed
	exited chan struct{} // closed once cmd has exited and been waited for
}

// errAddrInUse is the error of a server whose port another process took.
var errAddrInUse = errors.New("address already in use")

// maxPortAttempts bounds the ports Start tries.
const maxPortAttempts = 5

// pickPort returns a loopback port that was free a moment ago.
var pickPort = func() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Option configures a [Server].
type Option interface{ apply(*Server) }

type optionFunc func(*Server)

func (f optionFunc) apply(s *Server) { f(s) }

// Persistent makes the server keep its data as a production server that
// must lose nothing would: an append-only file synced on every write
// (appendonly yes, appendfsync always) in one directory for the server's
// life, so that Restart after Kill finds every acknowledged write.
func Persistent() Option { return optionFunc(func(s *Server) { s.persistent = true }) }

// Snapshots makes the server keep one data directory for its life, with no
// append-only file and no automatic snapshot: Restart after Kill loads the
// RDB file there (dump.rdb, in [Server.Dir]), the one SAVE last wrote or
// one the test put in its place, as a Redis restored from a backup does.
func Snapshots() Option { return optionFunc(func(s *Server) { s.snapshots = true }) }

// Cluster runs the server in cluster mode, alone, holding every slot: a
// command or script whose keys hash to different slots fails with
// CROSSSLOT, as in any Redis Cluster.
func Cluster() Option { return optionFunc(func(s *Server) { s.cluster = true }) }

// Start starts redis-server on a free loopback port and stops it when the
// test ends.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redis-server not found on PATH; install it (Debian/Ubuntu: apt-get install -y redis-server) to run this test"
		if os.Getenv("CI") == "true" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	s := &Server{tb: tb, bin: bin}
	for _, o := range opts {
		o.apply(s)
	}
	if s.persistent || s.snapshots || s.cluster {
		s.dir = tb.TempDir()
	}
	// A free port: the kernel picks one, we close it, redis-server takes it.
	// Another process can take it in between (a listener, or the local end
	// of a connection to somewhere else): redis-server then exits at once,
	// saying the address is in use, and we try another port.
	for attempt := 1; ; attempt++ {
		port, err := pickPort()
		if err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		s.port = port
		err = s.start()
		if err == nil {
			break
		}
		if !errors.Is(err, errAddrInUse) || attempt == maxPortAttempts {
			tb.Fatalf("redistest: %v", err)
		}
	}
	tb.Cleanup(s.Kill)
	return s
}

// Dir returns the data directory of a [Persistent] server (its
// append-only files are under it) or of a [Snapshots] server (its
// dump.rdb), "" for another.
func (s *Server) Dir() string { return s.dir }

// Addr returns the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Kill stops the server at once (SIGKILL), as a crash would.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Restart starts the server again on the same port after Kill: with an
// empty dataset, or, for a [Persistent] server, with what its append-only
// file holds, or, for a [Snapshots] server, with what its dump.rdb holds.
func (s *Server) Restart() {
	s.tb.Helper()
	if err := s.start(); err != nil {
		s.tb.Fatalf("redistest: restart: %v", err)
	}
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("already running")
	}
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--loglevel", "warning"}
	switch {
	case s.persistent:
		args = append(args, "--appendonly", "yes", "--appendfsync", "always", "--dir", s.dir)
	case s.snapshots:
		args = append(args, "--appendonly", "no", "--dir", s.dir)
	case s.cluster:
		args = append(args, "--appendonly", "no", "--dir", s.dir)
	default:
		args = append(args, "--appendonly", "no", "--dir", s.tb.TempDir())
	}
	if s.cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	}
	cmd := exec.Command(s.bin, args...)
	log := &logBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	// A child redis-server forks (an append-only file's rewrite) inherits
	// the log: once the server has exited, Wait does not wait for it.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if answers(s.Addr(), cmd.Process.Pid) == nil && (!s.cluster || clusterReady(s.Addr()) == nil) {
			s.cmd, s.exited = cmd, exited
			return nil
		}
		select {
		case <-exited:
			err := fmt.Errorf("redis-server on port %d exited before it answered: %q", s.port, log.lines())
			if log.has("Address already in use") {
				err = fmt.Errorf("%w: %w", errAddrInUse, err)
			}
			return err
		case <-time.After(10 * time.Millisecond): // polling for the process to listen, bounded above
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redis-server on port %d did not answer within 10s: %q", s.port, log.lines())
		}
	}
}

// logBuffer keeps the first maxLog bytes redis-server writes, for the
// message of a server that did not start.
type logBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const maxLog = 16 << 10

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p[:min(len(p), maxLog-len(b.buf))]...)
	return len(p), nil
}

func (b *logBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimRight(string(b.buf), "\n"), "\n")
}

func (b *logBuffer) has(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Contains(string(b.buf), s)
}

// answers reports whether the redis-server at addr is process pid (not
// another test's, started on the same port a moment before), from the
// process_id line of INFO, and has its dataset loaded: a restarted
// persistent server answers INFO while it reads its append-only file, and
// -LOADING to every command that touches data (loading:1 in INFO).
func answers(addr string, pid int) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	// INFO without a section: its default sections hold both lines, on
	// every Redis version (more than one section per INFO needs 7.0).
	if _, err := c.Write([]byte("*1\r\n$4\r\nINFO\r\n")); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if !strings.HasPrefix(head, "$") || err != nil || n < 0 || n > 1<<20 {
		return fmt.Errorf("INFO answered %q", head)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	if !strings.Contains(string(body), "process_id:"+strconv.Itoa(pid)+"\r\n") {
		return fmt.Errorf("the server on %s is not process %d", addr, pid)
	}
	if !strings.Contains(string(body), "\r\nloading:0\r\n") {
		return fmt.Errorf("the server on %s is loading its dataset", addr)
	}
	return nil
}

// clusterReady gives a cluster-mode server every slot (once: its
// nodes.conf keeps them across a restart) and reports whether its cluster
// state is ok, which it becomes a moment after.
func clusterReady(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	r := bufio.NewReader(c)
	// +OK, or -ERR Slot 0 is already busy: either way every slot is its.
	if _, err := c.Write([]byte("*4\r\n$7\r\nCLUSTER\r\n$13\r\nADDSLOTSRANGE\r\n$1\r\n0\r\n$5\r\n16383\r\n")); err != nil {
		return err
	}
	if _, err := r.ReadString('\n'); err != nil {
		return err
	}
	if _, err := c.Write([]byte("*2\r\n$7\r\nCLUSTER\r\n$4\r\nINFO\r\n")); err != nil {
		return err
	}
	head, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if !strings.HasPrefix(head, "$") || err != nil || n < 0 || n > 1<<20 {
		return fmt.Errorf("CLUSTER INFO answered %q", head)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	if !strings.Contains(string(body), "cluster_state:ok") {
		return fmt.Errorf("the cluster on %s is not ready", addr)
	}
	return nil
}

// Pause stops the server's process (SIGSTOP) without closing anything: its
// connections stay open and every command waits, as behind a long GC pause
// or a frozen VM, until Resume.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT): it answers what waited.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.tb.Errorf("redistest: %v: %v", sig, err)
	}
}
