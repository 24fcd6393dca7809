// Package dlraw gives the dead-letter command (cmd/meshless-deadletter)
// what the stores of package deadletter keep unexported: their entries as
// they are stored, readable or not, and the removal of a parked entry by
// its position. [deadletter.Store.List] skips an entry that does not
// decode, and [deadletter.Store.Purge] finds a parked entry by its ID,
// which an entry that does not decode has lost: without this, such an
// entry (a damaged file, one written by a newer version, a hand-edited
// stream) could be neither seen nor removed, and counted towards its key's
// bounds for ever.
//
// Package deadletter/boltstore and deadletter/redisstore register
// themselves here in their init; nothing here is on a call's path.
package dlraw
