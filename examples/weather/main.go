// Command weather runs the scenario meshless started from: a service calls
// an external weather API; the API turns slow (each request hangs), then
// fails, then recovers. Two copies of the same service run side by side,
// each in a process of its own: "bare", whose http.Client has a 30 s
// timeout, and "meshless", whose client goes through httpmw. Users call
// both at the same rate; the program prints, per phase, each service's own
// latency, how its answers ended, its peak goroutine count, and the
// requests it sent the API.
//
//	go run ./examples/weather
//	go run ./examples/weather -phase 300ms -rate 50
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	length := flag.Duration("phase", time.Second, "the length of each of the API's four phases")
	rate := flag.Int("rate", 100, "requests per second users send to each service")
	patience := flag.Duration("patience", 2*time.Second, "how long a user waits for the service's answer")
	hang := flag.Duration("hang", 30*time.Second, "how long the slow API holds a request")
	mode := flag.String("serve", "", "(internal) run one copy of the service: bare or meshless")
	apiURL := flag.String("api", "", "(internal) the weather API's URL, with -serve")
	flag.Parse()
	var err error
	if *mode != "" {
		err = serve(*mode, *apiURL)
	} else {
		err = run(*length, *rate, *patience, *hang)
	}
	if err != nil {
		log.Fatal(err)
	}
}

var modes = []string{"bare", "meshless"}

// child is one copy of the service, running in its own process.
type child struct {
	mode  string
	addr  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // what it prints after its address
}

func start(mode, apiURL string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c := &child{mode: mode, cmd: exec.Command(exe, "-serve", mode, "-api", apiURL), lines: make(chan string, 64)}
	c.cmd.Stderr = os.Stderr
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		c.stop()
		return nil, fmt.Errorf("the %s service did not start", mode)
	}
	c.addr = sc.Text()
	go func() {
		defer close(c.lines)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	return c, nil
}

func (c *child) stop() {
	c.stdin.Close()
	c.cmd.Wait() //nolint:errcheck // it exits when its stdin closes
}

// goroutines asks the child for its goroutine count.
func (c *child) goroutines(client *http.Client) int {
	resp, err := client.Get("http://" + c.addr + "/goroutines")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n, _ := strconv.Atoi(string(b))
	return n
}

// tally is what one service's users saw in one phase.
type tally struct {
	latencies          []time.Duration
	ok, failed, gaveUp int
	goroutines         int // the peak
}

// maxRate bounds -rate: the users' ticker needs an interval of 10µs or
// more (past a billion a second it would be 0, and time.NewTicker panics).
const maxRate = 100_000

func run(length time.Duration, rate int, patience, hang time.Duration) error {
	var errs []error
	if rate < 1 || rate > maxRate {
		errs = append(errs, fmt.Errorf("-rate must be in [1, %d], got %d", maxRate, rate))
	}
	if length <= 0 {
		errs = append(errs, fmt.Errorf("-phase must be positive, got %v", length))
	}
	if patience <= 0 {
		errs = append(errs, fmt.Errorf("-patience must be positive, got %v", patience))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	a := newAPI(hang)
	defer a.srv.Close()
	start0 := time.Now()
	stamp := func() string { return fmt.Sprintf("%5.2fs", time.Since(start0).Seconds()) }
	children := map[string]*child{}
	for _, m := range modes {
		c, err := start(m, a.srv.URL)
		if err != nil {
			return err
		}
		defer c.stop()
		children[m] = c
		go func() {
			for l := range c.lines {
				fmt.Printf("%s %-8s %s\n", stamp(), m, l)
			}
		}()
	}
	var (
		mu      sync.Mutex
		tallies = map[string]*[len(phases)]tally{"bare": {}, "meshless": {}}
		current phase
	)
	users := &http.Client{Timeout: patience, Transport: &http.Transport{MaxIdleConnsPerHost: 1000}}
	defer users.CloseIdleConnections()
	call := func(m string, p phase) {
		req, err := http.NewRequest(http.MethodGet, "http://"+children[m].addr+"/weather?city=lisbon", nil)
		if err != nil {
			panic(err) // a constant URL
		}
		req.Header.Set(phaseHeader, strconv.Itoa(int(p)))
		t0 := time.Now()
		resp, err := users.Do(req)
		d := time.Since(t0)
		if err == nil {
			io.Copy(io.Discard, resp.Body) //nolint:errcheck
			resp.Body.Close()
		}
		mu.Lock()
		defer mu.Unlock()
		t := &tallies[m][p]
		switch {
		case err != nil:
			t.gaveUp++
			d = patience
		case resp.StatusCode == http.StatusOK:
			t.ok++
		default:
			t.failed++
		}
		t.latencies = append(t.latencies, d)
	}

	// Sample each service's goroutines while the phases run.
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		probe := &http.Client{Timeout: time.Second}
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
			for _, m := range modes {
				n := children[m].goroutines(probe)
				mu.Lock()
				t := &tallies[m][current]
				t.goroutines = max(t.goroutines, n)
				mu.Unlock()
			}
		}
	}()

	fmt.Printf("%s the weather API at %s; services: bare at %s, meshless at %s; %d requests/s to each\n",
		stamp(), a.srv.URL, children["bare"].addr, children["meshless"].addr, rate)
	var wg sync.WaitGroup
	every := time.Second / time.Duration(rate)
	// Each phase's users send at its start and every interval after, the
	// last one an interval before it ends. Each request carries its phase
	// (X-Phase), and the API answers it as that phase: one that reaches the
	// API after the next phase began (a busy machine, a retry) still
	// counts, and is answered, in the phase its user sent it in.
	perPhase := max(1, int(length/every))
	for p := range phase(len(phases)) {
		a.set(p)
		mu.Lock()
		current = p
		mu.Unlock()
		fmt.Printf("%s the API is %v\n", stamp(), p)
		tick := time.NewTicker(every)
		end := time.After(length)
	send:
		for i := 0; ; i++ {
			for _, m := range modes {
				wg.Go(func() { call(m, p) })
			}
			if i+1 == perPhase {
				<-end
				break
			}
			select {
			case <-end: // the ticks fell behind
				break send
			case <-tick.C:
			}
		}
		tick.Stop()
	}
	fmt.Printf("%s waiting for the users still waiting (at most -patience, %v)\n", stamp(), patience)
	wg.Wait()
	close(stopSampling)
	<-sampled
	report(tallies, a)
	return nil
}

func report(tallies map[string]*[len(phases)]tally, a *api) {
	fmt.Printf("\n%-10s %-9s %6s %6s %6s %8s %9s %9s %11s %9s\n",
		"API phase", "service", "users", "ok", "failed", "gave up", "p50", "p99", "goroutines", "API reqs")
	for p := range phase(len(phases)) {
		for _, m := range modes {
			t := tallies[m][p]
			fmt.Printf("%-10s %-9s %6d %6d %6d %8d %9s %9s %11d %9d\n",
				p, m, len(t.latencies), t.ok, t.failed, t.gaveUp,
				quantile(t.latencies, 0.5), quantile(t.latencies, 0.99), t.goroutines, a.requests(m, p))
		}
	}
	fmt.Println(`
ok: the service answered 200; failed: it answered an error (meshless: at once);
gave up: the user stopped waiting after -patience. p50/p99: the service's
latency as its users saw it. goroutines: the service process's peak.`)
}

func quantile(ds []time.Duration, q float64) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	d := s[min(len(s)-1, int(q*float64(len(s))))]
	switch {
	case d >= time.Second:
		return strings.TrimSuffix(fmt.Sprintf("%.2fs", d.Seconds()), "")
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%dµs", d.Microseconds())
}
