// Package dashboard builds meshless's Grafana dashboard,
// docs/grafana/meshless.json, as typed Go with the Grafana Foundation SDK
// (github.com/grafana/grafana-foundation-sdk/go): the JSON schema is the
// SDK's, and this package says only what the panels show.
//
// The committed file is generated; to change the dashboard, change this
// package and run, from the repository root:
//
//	go generate ./dashboard
//
// TestCommittedJSONIsGenerated fails while the committed file differs from
// what [JSON] returns.
//
// The dashboard is a list of rows ([Rows]); each row is one function that
// returns its title and panels. Adding a row is writing such a function and
// adding it to the list. Every query reads only metrics of the catalogue
// (docs/metrics.md), filtered by the dashboard's variables, and every rate
// uses $__rate_interval; the end-to-end test in e2e/ runs every query
// against a real Prometheus that scrapes examples/chaos.
package dashboard
