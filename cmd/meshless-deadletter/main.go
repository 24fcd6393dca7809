package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/boltstore"
	"github.com/meshless/meshless/deadletter/redisstore"
	"github.com/meshless/meshless/internal/dlraw"
)

const usage = `meshless-deadletter lists, inspects, requeues and purges the entries of
meshless dead-letter queues (Go package github.com/meshless/meshless/deadletter):
calls an open circuit breaker deferred, waiting to be replayed, and entries
parked after too many failed replays, waiting for an operator.

Usage:
  meshless-deadletter (-file PATH | -redis ADDR [-namespace NS]) COMMAND [ARGS]

The store:
  -file PATH       a local store's bbolt file. bbolt locks the file: use the
                   command while the service that owns it is stopped (a
                   running service offers the same operations through its
                   deadletter.Queue).
  -redis ADDR      a Redis store: host:port, or redis://[user:password@]host:port/db.
                   Safe while the services run.
  -namespace NS    the Redis store's namespace (default "meshless").
  -timeout D       bound on the whole command (default 30s).

Commands:
  keys                          the keys that hold entries, with their figures
  list KEY [waiting|parked]     a key's entries, oldest first (default: parked),
       [-n N] [-after POS]      after a position: N that decode (default 100, at
                                most 1000), and those that do not decode before
                                them, the first 20 with the reason, the others counted
  show KEY ID                   one entry: what to call, metadata, payload
  requeue KEY (ID... | -all)    move parked entries back to the tail of the key's
                                waiting entries: replayed again from scratch,
                                with the same replay id
  purge KEY (ID... | -at POS... | -all)
                                delete parked entries: by ID, by position (an
                                entry that does not decode has no ID), or all

Exit status: 0 done, 1 failed, 2 a usage error.
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// errUsage marks a usage error (exit status 2).
var errUsage = errors.New("usage")

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("meshless-deadletter", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	file := fs.String("file", "", "")
	addr := fs.String("redis", "", "")
	ns := fs.String("namespace", redisstore.DefaultNamespace, "")
	timeout := fs.Duration("timeout", 30*time.Second, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprintf(stderr, "meshless-deadletter: %v\n\n%s", err, usage)
		return 2
	}
	err := func() error {
		if (*file == "") == (*addr == "") {
			return fmt.Errorf("%w: give one store: -file PATH or -redis ADDR", errUsage)
		}
		if *timeout <= 0 {
			return fmt.Errorf("%w: -timeout must be positive, got %v", errUsage, *timeout)
		}
		if fs.NArg() == 0 {
			return fmt.Errorf("%w: no command", errUsage)
		}
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		store, closeStore, err := openStore(*file, *addr, *ns)
		if err != nil {
			return err
		}
		defer closeStore()
		return command(ctx, store, fs.Args(), stdout)
	}()
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "meshless-deadletter: %s (-h for help)\n", cluster.Redact(err.Error()))
		return 2
	}
	fmt.Fprintf(stderr, "meshless-deadletter: %s\n", cluster.Redact(err.Error())) // no password shown
	return 1
}

func openStore(file, addr, ns string) (deadletter.Store, func(), error) {
	if file != "" {
		fi, err := os.Stat(file)
		if err != nil {
			return nil, nil, err // never create a file by mistake
		}
		if fi.Mode().IsRegular() && fi.Size() == 0 { // nor fill an empty one
			return nil, nil, fmt.Errorf("%s is empty: not a dead-letter store", file)
		}
		s, err := boltstore.Open(file)
		if err != nil {
			return nil, nil, err
		}
		return s, func() { _ = s.Close() }, nil
	}
	opt := &redis.Options{Addr: addr}
	if strings.Contains(addr, "://") {
		// Read as cluster.redis.url is: the parser's own error can show a
		// password (a "/", "?" or "#" in it, not percent-encoded, ends the
		// host for the parser); config's never does.
		o, err := (&config.RedisSection{URL: &addr}).Options()
		if pe := (*config.PathError)(nil); errors.As(err, &pe) {
			// Without its "want redis://[user:password@]host:port/db: ",
			// which Redact would take for a password.
			_, problem, _ := strings.Cut(pe.Problem, "/db: ")
			return nil, nil, fmt.Errorf("-redis: not a valid Redis URL: %s", problem)
		} else if err != nil {
			return nil, nil, fmt.Errorf("-redis: %w", err)
		}
		opt = o
	}
	rdb := redis.NewClient(opt)
	s, err := redisstore.New(rdb, redisstore.WithNamespace(ns))
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	return s, func() { _ = s.Close(); _ = rdb.Close() }, nil
}

func command(ctx context.Context, s deadletter.Store, args []string, w io.Writer) error {
	name, args := args[0], args[1:]
	switch name {
	case "keys":
		if len(args) != 0 {
			return fmt.Errorf("%w: keys takes no arguments", errUsage)
		}
		return keys(ctx, s, w)
	case "list":
		return list(ctx, s, args, w)
	case "show":
		if len(args) != 2 {
			return fmt.Errorf("%w: show KEY ID", errUsage)
		}
		return show(ctx, s, args[0], args[1], w)
	case "requeue", "purge":
		if len(args) < 2 {
			return fmt.Errorf("%w: %s KEY (ID... | -all)", errUsage, name)
		}
		return operate(ctx, s, name, args[0], args[1:], w)
	}
	return fmt.Errorf("%w: unknown command %q", errUsage, name)
}

func keys(ctx context.Context, s deadletter.Store, w io.Writer) error {
	ks, err := s.Keys(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tWAITING\tPARKED\tBYTES\tOLDEST WAITING")
	failed := 0
	for _, k := range ks {
		st, err := s.Stats(ctx, k)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("key %q: %w", k, err)
			}
			// One key's data may be hostile (a value of another type):
			// the other keys are still shown.
			failed++
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\tcannot read: %s\n", printable(k), printable(err.Error()))
			continue
		}
		oldest := "-"
		if !st.Oldest.IsZero() {
			oldest = st.Oldest.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", printable(k), st.Waiting, st.Parked, st.Bytes, oldest)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d keys could not be read", failed, len(ks))
	}
	return nil
}

func list(ctx context.Context, s deadletter.Store, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	n := fs.Int("n", 100, "")
	after := fs.String("after", "", "")
	if len(args) == 0 {
		return fmt.Errorf("%w: list KEY [waiting|parked] [-n N] [-after POS]", errUsage)
	}
	key, rest := args[0], args[1:]
	state := deadletter.Parked
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		switch rest[0] {
		case "waiting":
			state = deadletter.Waiting
		case "parked":
		default:
			return fmt.Errorf("%w: list: %q is not waiting or parked", errUsage, rest[0])
		}
		rest = rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return fmt.Errorf("%w: list: %v (list KEY [waiting|parked] [-n N] [-after POS])", errUsage, err)
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: list: unexpected argument %q (list KEY [waiting|parked] [-n N] [-after POS])", errUsage, fs.Arg(0))
	}
	if *n < 1 || *n > deadletter.MaxList {
		return fmt.Errorf("%w: -n must be in [1, %d]", errUsage, deadletter.MaxList)
	}
	if raw := dlraw.Of(s); raw != nil {
		return listRaw(ctx, raw, key, state, *after, *n, w)
	}
	es, err := s.List(ctx, key, state, *after, *n)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POS\tID\tENQUEUED\tFAILED REPLAYS\tMETHOD\tPAYLOAD BYTES")
	for _, e := range es {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\n", printable(e.Pos), e.ID, e.Enqueued.UTC().Format(time.RFC3339), e.Replays, printable(e.Method), len(e.Payload))
	}
	return tw.Flush()
}

// find returns key's entry id, parked or waiting, reading at most
// MaxMaxEntries of each.
func find(ctx context.Context, s deadletter.Store, key, id string) (deadletter.Entry, deadletter.State, error) {
	if raw := dlraw.Of(s); raw != nil {
		return findRaw(ctx, s, raw, key, id)
	}
	for _, state := range []deadletter.State{deadletter.Parked, deadletter.Waiting} {
		after := ""
		for range deadletter.MaxMaxEntries/deadletter.MaxList + 1 {
			if err := ctx.Err(); err != nil { // the bbolt store does not watch ctx
				return deadletter.Entry{}, 0, err
			}
			es, err := s.List(ctx, key, state, after, deadletter.MaxList)
			if err != nil {
				return deadletter.Entry{}, 0, err
			}
			for _, e := range es {
				if e.ID == id {
					return e, state, nil
				}
			}
			if len(es) < deadletter.MaxList {
				break
			}
			after = es[len(es)-1].Pos
		}
	}
	return deadletter.Entry{}, 0, fmt.Errorf("key %q: %w: %s", key, deadletter.ErrNotFound, id)
}

// printable returns s as it is when every character of it prints, else
// quoted: what a store hands back is hostile, and a control character in a
// method or a target would forge the table's rows or drive the terminal.
func printable(s string) string {
	for _, r := range s {
		if !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// maxShown bounds the payload bytes show prints.
const maxShown = 4 << 10

func show(ctx context.Context, s deadletter.Store, key, id string, w io.Writer) error {
	e, state, err := find(ctx, s, key, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "id:             %s\nkey:            %s\nstate:          %s\nposition:       %s\n", e.ID, printable(e.Key), state, printable(e.Pos))
	fmt.Fprintf(w, "enqueued:       %s\nfailed replays: %d\nmethod:         %s\ntarget:         %s\n",
		e.Enqueued.UTC().Format(time.RFC3339Nano), e.Replays, printable(e.Method), printable(e.Target))
	mdKeys := make([]string, 0, len(e.Metadata))
	for k := range e.Metadata {
		mdKeys = append(mdKeys, k)
	}
	slices.Sort(mdKeys)
	fmt.Fprintln(w, "metadata:")
	for _, k := range mdKeys {
		for _, v := range e.Metadata[k] {
			fmt.Fprintf(w, "  %s: %s\n", k, strconv.Quote(v))
		}
	}
	p := e.Payload
	fmt.Fprintf(w, "payload:        %d bytes\n", len(p))
	if len(p) > maxShown {
		cut := maxShown
		for i := 0; i < utf8.UTFMax-1 && !utf8.RuneStart(p[cut]); i++ {
			cut-- // between characters: a cut text stays text
		}
		p = p[:cut]
	}
	if utf8.Valid(p) {
		fmt.Fprintln(w, strconv.Quote(string(p)))
	} else {
		fmt.Fprint(w, hex.Dump(p))
	}
	if len(p) < len(e.Payload) {
		fmt.Fprintf(w, "(the first %d bytes)\n", len(p))
	}
	return nil
}

func operate(ctx context.Context, s deadletter.Store, op, key string, args []string, w io.Writer) error {
	if i := slices.Index(args, "--all"); i >= 0 {
		args[i] = "-all" // as Go's flags take --all
	}
	raw := dlraw.Of(s)
	var (
		todo []parked // what to requeue or purge: by ID, or at a position
		bad  []string // positions of parked entries requeue cannot move
	)
	switch {
	case slices.Contains(args, "-all"):
		if len(args) != 1 {
			return fmt.Errorf("%w: %s KEY (ID... | -all)", errUsage, op)
		}
		all, err := allParked(ctx, s, key)
		if err != nil {
			return err
		}
		for _, p := range all {
			switch {
			case op == "purge" && raw != nil:
				todo = append(todo, parked{pos: p.pos}) // by position: no search by ID
			case p.id == "":
				bad = append(bad, p.pos)
			case raw != nil:
				todo = append(todo, p) // by position: no search by ID for each
			default:
				todo = append(todo, parked{id: p.id})
			}
		}
	case args[0] == "-at":
		if op != "purge" || raw == nil || len(args) < 2 {
			return fmt.Errorf("%w: purge KEY -at POS...", errUsage)
		}
		for _, pos := range args[1:] {
			todo = append(todo, parked{pos: pos})
		}
	default:
		for _, id := range args {
			todo = append(todo, parked{id: id})
		}
	}
	now := time.Now()
	done := 0
	for _, p := range todo {
		err := ctx.Err() // -timeout: the bbolt store does not watch ctx
		what := p.id
		switch {
		case err != nil:
		case op == "requeue" && p.pos != "":
			err = raw.RequeueAt(ctx, key, p.pos, now)
		case op == "requeue":
			err = s.Requeue(ctx, key, p.id, now)
		case p.id == "":
			what = "at " + p.pos
			err = raw.PurgeAt(ctx, key, p.pos)
		default:
			err = s.Purge(ctx, key, p.id)
		}
		if err != nil {
			fmt.Fprintf(w, "%sd %d of %d\n", op, done, len(todo))
			return fmt.Errorf("%s %s: %w", op, what, err)
		}
		done++
	}
	fmt.Fprintf(w, "%sd %d\n", op, done)
	if len(bad) > 0 {
		return unreadableLeft(key, bad)
	}
	return nil
}
