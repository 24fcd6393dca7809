package procpin_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/meshless/meshless/internal/procpin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Every goroutine, on whatever processor it runs, gets an id in
// [0, GOMAXPROCS).
func TestIDIsAProcessor(t *testing.T) {
	n := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for range 4 * n {
		wg.Go(func() {
			for range 1000 {
				if p := procpin.ID(); p < 0 || p >= n {
					t.Errorf("ID() = %d, want in [0, %d)", p, n)
					return
				}
			}
		})
	}
	wg.Wait()
}

func ExampleID() {
	shards := make([]int, runtime.GOMAXPROCS(0))
	shards[procpin.ID()%len(shards)]++ // this processor's shard
	sum := 0
	for _, s := range shards {
		sum += s
	}
	fmt.Println(sum)
	// Output: 1
}
