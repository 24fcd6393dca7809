package resilience_test

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/meshless/meshless/resilience"
)

func TestRegistryCreatesOncePerKey(t *testing.T) {
	var created atomic.Int32
	reg := resilience.NewRegistry(0, func(key string) (*string, error) {
		created.Add(1)
		return &key, nil
	})
	var wg sync.WaitGroup
	got := make([]*string, 64)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := reg.Get("payments")
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		}()
	}
	wg.Wait()
	if created.Load() != 1 {
		t.Fatalf("create ran %d times for one key, want 1", created.Load())
	}
	for _, v := range got {
		if v != got[0] {
			t.Fatal("Get returned different instances for one key")
		}
	}
	if v, ok := reg.Lookup("payments"); !ok || v != got[0] {
		t.Fatal("Lookup does not find the created instance")
	}
	if _, ok := reg.Lookup("other"); ok {
		t.Fatal("Lookup created or found an unknown key")
	}
}

func TestRegistryRefusesPastItsBound(t *testing.T) {
	reg := resilience.NewRegistry(3, func(key string) (string, error) { return key, nil })
	for i := range 3 {
		if _, err := reg.Get("k" + strconv.Itoa(i)); err != nil {
			t.Fatalf("Get within the bound: %v", err)
		}
	}
	_, err := reg.Get("k3")
	var full *resilience.RegistryFullError
	if !errors.As(err, &full) || !errors.Is(err, resilience.ErrRegistryFull) {
		t.Fatalf("Get past the bound = %v, want a RegistryFullError", err)
	}
	if full.Limit != 3 || full.Key != "k3" || err.Error() != `registry full: 3 instances, refusing key "k3"` {
		t.Fatalf("error = %q (%+v), want it to name the bound and the key", err, full)
	}
	if _, err := reg.Get("k1"); err != nil {
		t.Fatalf("an existing key is refused at the bound: %v", err)
	}
	if reg.Len() != 3 {
		t.Fatalf("Len() = %d, want 3", reg.Len())
	}
	n := 0
	reg.Range(func(string, string) bool { n++; return true })
	if n != 3 {
		t.Fatalf("Range visited %d, want 3", n)
	}
}

func TestRegistryDoesNotKeepFailedCreations(t *testing.T) {
	fail := true
	reg := resilience.NewRegistry(1, func(key string) (string, error) {
		if fail {
			return "", errors.New("bad config for " + key)
		}
		return key, nil
	})
	if _, err := reg.Get("a"); err == nil || err.Error() != "bad config for a" {
		t.Fatalf("Get = %v, want create's error", err)
	}
	fail = false
	if v, err := reg.Get("a"); err != nil || v != "a" {
		t.Fatalf("Get after a failed create = %q, %v; want a retry that succeeds", v, err)
	}
}
