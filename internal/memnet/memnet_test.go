package memnet_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/meshless/meshless/internal/memnet"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A dialled connection reaches the one Accept returns, both ways; inside a
// bubble, a reader blocked on it lets fake time advance.
func TestADialReachesAccept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lis := memnet.Listen()
		defer lis.Close()
		accepted := make(chan net.Conn, 1)
		go func() {
			c, err := lis.Accept()
			if err != nil {
				t.Error(err)
				return
			}
			accepted <- c
		}()
		client, err := lis.DialContext(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		server := <-accepted
		defer server.Close()
		go func() {
			time.Sleep(time.Hour) // fake time: the blocked read below is durable
			_, _ = server.Write([]byte("pong"))
		}()
		buf := make([]byte, 4)
		start := time.Now()
		if _, err := io.ReadFull(client, buf); err != nil || string(buf) != "pong" {
			t.Fatalf("read %q, %v; want pong", buf, err)
		}
		if waited := time.Since(start); waited != time.Hour {
			t.Fatalf("the read waited %v of the bubble's time, want 1h", waited)
		}
	})
}

// A closed listener refuses dials and ends Accept; a dial whose context
// ends first returns the context's error.
func TestAClosedListenerRefuses(t *testing.T) {
	lis := memnet.Listen()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := lis.DialContext(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a dial with a cancelled context: %v, want context.Canceled", err)
	}
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
	_ = lis.Close() // twice is fine
	if _, err := lis.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed listener: %v, want net.ErrClosed", err)
	}
	if _, err := lis.Dialer()(t.Context(), "anything"); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a dial to a closed listener: %v, want net.ErrClosed", err)
	}
	if a := lis.Addr(); a.Network() != "mem" || a.String() != "mem" {
		t.Fatalf("Addr() = %s/%s, want mem/mem", a.Network(), a)
	}
}

func ExampleListen() {
	lis := memnet.Listen()
	defer lis.Close()
	go func() {
		c, err := lis.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Write([]byte("hello"))
	}()
	c, err := lis.DialContext(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	buf := make([]byte, 5)
	_, _ = io.ReadFull(c, buf)
	fmt.Println(string(buf))
	// Output: hello
}
