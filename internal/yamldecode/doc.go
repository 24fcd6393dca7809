// Package yamldecode reads one YAML document and decodes it strictly into Go
// structs by their yaml tags. Every problem is found, not only the first,
// and each names its path (services."a.B".retry.maxAttempts) and line: a
// key no field has, a key written twice, a value of the wrong kind, a merge
// key (<<), an alias used as a key, and a document that holds too many
// values (each alias counted again where it is used). A syntax error is
// reported at the line where it really is (internal/yamlscan), not where the
// YAML parser puts it.
//
// Package config gives it its schema: its own value types (durations,
// status codes, names), its sections and the limit on values; and turns
// its problems into config's errors. It runs when a configuration is
// parsed, never on a call's path.
package yamldecode
