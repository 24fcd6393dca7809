// Package httpcall holds the context key through which an HTTP client's
// call in progress (httpmw's) is found behind the contexts that wrap it,
// such as the engine's observe mode or a call's overall deadline, so that
// otelmw reads its method and status (otelmw.HTTPCall) whatever wraps it.
package httpcall
