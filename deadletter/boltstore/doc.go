// Package boltstore keeps dead-letter entries (package deadletter) in a
// local file with go.etcd.io/bbolt: the embedded default store, one file
// per process.
//
// Every change is one bbolt transaction, committed with fdatasync before
// the call returns, so an entry that [Store.Append] accepted survives a
// crash of the process or of the machine. Each key has a bucket of waiting
// entries and one of parked entries, ordered by a sequence number, and
// counters that make the bounds (deadletter.Limits) and the figures
// (Stats) cheap; the bound's check and the append are one transaction.
//
// A bbolt file is locked by the process that opens it. Opening a path this
// process already has open shares the file ([Open] returns another handle);
// a file another process holds is an error after [LockTimeout]. So the
// operator's command (cmd/meshless-deadletter) works on the file of a
// service that is stopped; a running service exposes the same operations
// through its deadletter.Queue.
//
//	store, err := boltstore.Open("/var/lib/app/deadletter.db")
//	if err != nil {
//		return err
//	}
//	defer store.Close()
//	q, err := deadletter.New(store, cfg)
package boltstore
