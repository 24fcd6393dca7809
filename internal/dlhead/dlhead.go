// Package dlhead gives the dead-letter stores what package deadletter
// keeps unexported: the head of an encoded entry (every field but the
// payload) decoded without the payload, which the encoding keeps last,
// after its length. A store's listing for an operator reads no payload
// with it: a page of a thousand entries of a MiB each reads their heads,
// not a GiB. It imports nothing of meshless, so that package deadletter
// can set the hook (in its init) without an import cycle.
package dlhead

// Decode decodes into e, a *deadletter.Entry, every field of an encoded
// entry but its payload, with the same checks as Entry.UnmarshalBinary,
// and returns the payload's length. b is the encoding's first bytes (all
// of it, or a prefix), total the whole encoding's length. short is true
// when b ends before the head does: the caller reads more, or all of it.
// Pos is left as it was.
var Decode func(b []byte, total int, e any) (payloadBytes int, short bool, err error)
