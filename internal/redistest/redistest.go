package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
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
	dir        string // the data directory of a persistent server

	mu  sync.Mutex
	cmd *exec.Cmd // nil while killed
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
	if s.persistent {
		s.dir = tb.TempDir()
	}
	// A free port: the kernel picks one, we close it, redis-server takes it.
	// Another process could take it in between; start then fails clearly.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	if err := s.start(); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(s.Kill)
	return s
}

// Dir returns the data directory of a [Persistent] server (its
// append-only files are under it), "" for another.
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
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart starts the server again on the same port after Kill: with an
// empty dataset, or, for a [Persistent] server, with what its append-only
// file holds.
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
	if s.persistent {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always", "--dir", s.dir)
	} else {
		args = append(args, "--appendonly", "no", "--dir", s.tb.TempDir())
	}
	cmd := exec.Command(s.bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	// Keep the pipe drained so that redis-server never blocks on its log.
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ping(s.Addr()) == nil {
			s.cmd = cmd
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			var log []string
			for l := range lines {
				log = append(log, l)
			}
			return fmt.Errorf("redis-server on port %d did not answer within 10s: %q", s.port, log)
		}
		time.Sleep(10 * time.Millisecond) // polling for the process to listen, bounded above
	}
}

// ping sends PING in RESP and waits for +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}
