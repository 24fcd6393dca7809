// Package dlhead gives the dead-letter stores what package deadletter
// keeps unexported: the head of an encoded entry (every field but the
// payload) decoded without the payload, which the encoding keeps last,
// after its length. A store's listing for an operator reads no payload
// with it: a page of a thousand entries of a MiB each reads their heads,
// not a GiB. It imports nothing of meshless, so that package deadletter
// can set the hook (in its init) without an import cycle.
package dlhead
