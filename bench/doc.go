// Package bench holds meshless's side-by-side benchmarks against its peers
// (sony/gobreaker, failsafe-go). It is a separate module so that the peers
// never enter meshless's own go.mod.
//
// Run them as docs/benchmarks.md says:
//
//	cd bench && go test -run '^$' -bench . -count 10 | tee new.txt && benchstat new.txt
package bench
