package httpcall

// Key is the context key whose value is the call in progress itself:
// httpmw's call answers ctx.Value(Key{}) with itself, and a context derived
// from it passes the question on.
type Key struct{}
