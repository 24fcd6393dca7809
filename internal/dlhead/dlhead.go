package dlhead

// Decode decodes into e, a *deadletter.Entry, every field of an encoded
// entry but its payload, with the same checks as Entry.UnmarshalBinary,
// and returns the payload's length. b is the encoding's first bytes (all
// of it, or a prefix), total the whole encoding's length. short is true
// when b ends before the head does: the caller reads more, or all of it.
// Pos is left as it was.
var Decode func(b []byte, total int, e any) (payloadBytes int, short bool, err error)
