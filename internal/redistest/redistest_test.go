package redistest_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshless/meshless/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ping sends PING and wants PONG.
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
	_, err = bufio.NewReader(c).ReadString('\n')
	return err
}

func TestKillAndRestartOnTheSamePort(t *testing.T) {
	srv := redistest.Start(t)
	addr := srv.Addr()
	if err := ping(addr); err != nil {
		t.Fatalf("a started server does not answer: %v", err)
	}
	srv.Kill()
	if err := ping(addr); err == nil {
		t.Fatal("a killed server answers")
	}
	srv.Restart()
	if srv.Addr() != addr {
		t.Fatalf("restarted on %s, want %s", srv.Addr(), addr)
	}
	if err := ping(addr); err != nil {
		t.Fatalf("a restarted server does not answer: %v", err)
	}
}

// A test starts its own server; it is stopped when the test ends. (It needs
// redis-server, so it is compiled but not run.)
func ExampleStart() {
	var t *testing.T // the test's
	srv := redistest.Start(t)
	_ = srv.Addr() // host:port on loopback, for a go-redis client
}
