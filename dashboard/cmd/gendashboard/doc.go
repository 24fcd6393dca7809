// Command gendashboard writes meshless's Grafana dashboard, built by package
// github.com/meshless/meshless/dashboard, to a file:
//
//	go run ./dashboard/cmd/gendashboard -o docs/grafana/meshless.json
//
// or, from the repository root, go generate ./dashboard (which runs it with
// the path above). The same code writes the same bytes.
package main
