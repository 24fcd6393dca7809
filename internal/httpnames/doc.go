// Package httpnames checks the names HTTP's configuration is keyed by,
// with net/http's own rules: a host as a request's URL writes it, and a
// route as a net/http ServeMux pattern, parsed, and compared with a host's
// other routes, by a scratch ServeMux. Package config reports what it
// finds at the key's path; it runs when a configuration is validated, never
// on a call's path.
package httpnames
