package clusterlink

import (
	"strings"
	"testing"

	"github.com/meshless/meshless/cluster"
)

// A target of at most 64 safe bytes is the namespace as it is; any other
// is cut to 40 readable bytes (user information dropped, unsafe bytes as
// _) and made unique by 16 hex digits of its SHA-256: at most 66 bytes
// with the default prefix, always a valid namespace.
func TestTargetNamespace(t *testing.T) {
	safe64 := "dns:///" + strings.Repeat("a", 64-len("dns:///"))
	for _, tc := range []struct {
		name, target string
		want         string // "" for a hashed one, checked by its shape
		readable     string // a hashed one's readable part
	}{
		{name: "short", target: "dns:///payments:443", want: "meshless@dns:///payments:443"},
		{name: "ipv6", target: "dns:///[::1]:443", want: "meshless@dns:///[::1]:443"},
		{name: "unix", target: "unix:///run/app.sock", want: "meshless@unix:///run/app.sock"},
		{name: "64 safe bytes", target: safe64, want: "meshless@" + safe64},
		{name: "65 safe bytes", target: safe64 + "b", readable: safe64[:40]},
		{name: "space", target: "passthrough:///a b", readable: "passthrough:///a_b"},
		{name: "tilde", target: "dns:///x~0123456789abcdef", readable: "dns:///x_0123456789abcdef"},
		{name: "non-ASCII", target: "dns:///zürich:443", readable: "dns:///z_rich:443"},
		{name: "invalid UTF-8", target: "dns:///a\xffb", readable: "dns:///a_b"},
		{name: "user information in the authority", target: "dns://user:secret@resolver/svc:443", readable: "dns://resolver/svc:443"},
		{name: "user information in the endpoint", target: "dns:///user:secret@svc:443", readable: "dns://svc:443"},
		{name: "user information, no scheme", target: "user:secret@svc:443", readable: "svc:443"},
		{name: "empty", target: "", want: "meshless@"},
		// Safe bytes that would make keys another namespace could write
		// (internal/clusterkey): hashed, their readable part without colons
		// if it holds such a separator.
		{name: "ends with a key's kind", target: "unix:w", readable: "unix:w"},
		{name: "holds a key's kind", target: "dns:///a:probes:443", readable: "dns_///a_probes_443"},
		{name: "long, holds a key's kind", target: "dns:///a:open:" + strings.Repeat("b", 60), readable: "dns_///a_open_" + strings.Repeat("b", 26)},
		{name: "10 KiB", target: strings.Repeat("é", 5<<10), readable: strings.Repeat("_", 40)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := targetNamespace("meshless", tc.target)
			if got != targetNamespace("meshless", tc.target) {
				t.Fatal("not deterministic")
			}
			if tc.want != "" || tc.readable == "" {
				if got != tc.want {
					t.Fatalf("namespace %q, want %q", got, tc.want)
				}
			} else {
				readable, sum, ok := strings.Cut(strings.TrimPrefix(got, "meshless@"), "~")
				if !strings.HasPrefix(got, "meshless@") || !ok || readable != tc.readable || len(sum) != 16 || strings.Trim(sum, "0123456789abcdef") != "" {
					t.Fatalf("namespace %q, want meshless@%s~<16 hex digits>", got, tc.readable)
				}
				if len(got) > 66 {
					t.Fatalf("namespace of %d bytes, want at most 66", len(got))
				}
			}
			if strings.Contains(got, "secret") {
				t.Fatalf("namespace %q shows the password", got)
			}
			cfg := cluster.DefaultConfig()
			cfg.Namespace = got
			if err := cfg.Validate(); err != nil {
				t.Fatalf("namespace %q: %v", got, err)
			}
		})
	}
}

// Targets that read the same once cut or made safe stay apart.
func TestTargetNamespacesOfDistinctTargetsDiffer(t *testing.T) {
	long := "dns:///" + strings.Repeat("a", 60)
	pairs := [][2]string{
		{long + "1", long + "2"},                            // differ past the readable part
		{"dns:///a b", "dns:///a_b"},                        // a space and what replaces it
		{"dns:///a b", "dns:///a\tb"},                       // two unsafe bytes
		{"u:p@svc:443", "svc:443"},                          // user information dropped from the readable part only
		{"dns:///x~" + strings.Repeat("0", 16), "dns:///x"}, // a target shaped like a hashed one
	}
	for _, p := range pairs {
		a, b := targetNamespace("meshless", p[0]), targetNamespace("meshless", p[1])
		if a == b {
			t.Errorf("%q and %q share namespace %q", p[0], p[1], a)
		}
	}
	if a, b := targetNamespace("team-a", "dns:///svc:443"), targetNamespace("team-b", "dns:///svc:443"); a == b {
		t.Errorf("two prefixes share namespace %q", a)
	}
}
