// Package docscheck holds no code: its tests keep README.md and docs/*.md
// true to the repository. They check every relative link and anchor
// (links_test.go), that docs/configuration.md names exactly the YAML keys
// grpcmw's decoder reads (config_test.go), that every Go snippet compiles
// unless it is marked as a fragment (snippets_test.go), and that the
// programs of docs/getting-started.md build in a module of their own and
// print what the page shows (gettingstarted_test.go), and that the index,
// docs/README.md, links every page while no page outgrows 600 lines
// (index_test.go).
package docscheck
