// Package redistest starts a real redis-server for tests: its own instance
// on a free loopback port, persistence off (no snapshots, no append-only file),
// stopped when the test ends. Kill and Restart stop it as a crash would and
// start it again on the same port, empty — or, with [Persistent], with every
// write it acknowledged (an append-only file synced on each write), or, with
// [Snapshots], with the RDB snapshot its directory holds (an older dataset).
//
// Without redis-server on PATH a test skips, with a message saying how to
// install it; with CI=true in the environment it fails instead, so that CI
// never passes by skipping.
//
//	srv := redistest.Start(t)
//	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
package redistest
