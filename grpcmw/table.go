package grpcmw

import (
	"strings"
	"sync/atomic"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// OtherMethod is the method name under which a chain keeps the policies of
// every method it does not know: one the configuration does not name and no
// service descriptor linked into the program declares (a name a remote
// client invented, or one a program built at run time), and every method
// past the chain's bound ([WithMaxMethods]). Such a call runs with the
// policies of its service's entry when the configuration names its service
// ("pkg.Svc/_OTHER"), else with the defaults' ("_OTHER/_OTHER"); it never
// creates state of its own, and never runs without policies.
const OtherMethod = "_OTHER"

// methodTable maps full method names to their policy sets. Reads take no
// lock and allocate nothing once a method is in the snapshot. New entries go
// to a small pending map under a lock, and are folded into a new snapshot
// when the pending map has grown as large as the snapshot: building a table
// of n methods costs O(n) map writes in all, not O(n²).
type methodTable struct {
	snap    atomic.Pointer[map[string]*method]
	pending map[string]*method // under Chain.mu
	n       int                // entries in snap and pending, under Chain.mu
	copied  int                // entries copied into new snapshots, under Chain.mu
}

func newMethodTable() *methodTable {
	t := &methodTable{pending: map[string]*method{}}
	empty := map[string]*method{}
	t.snap.Store(&empty)
	return t
}

// load returns the entry of key from the snapshot.
func (t *methodTable) load(key string) (*method, bool) {
	m, ok := (*t.snap.Load())[key]
	return m, ok
}

// loadLocked looks in the snapshot and the pending map. Called with
// Chain.mu held.
func (t *methodTable) loadLocked(key string) (*method, bool) {
	if m, ok := t.load(key); ok {
		return m, true
	}
	m, ok := t.pending[key]
	return m, ok
}

// storeLocked adds an entry. Called with Chain.mu held.
func (t *methodTable) storeLocked(key string, m *method) {
	t.pending[key] = m
	t.n++
	snap := *t.snap.Load()
	if len(t.pending) < max(len(snap), 16) {
		return
	}
	next := make(map[string]*method, len(snap)+len(t.pending))
	for k, v := range snap {
		next[k] = v
	}
	for k, v := range t.pending {
		next[k] = v
	}
	t.copied += len(next)
	t.snap.Store(&next)
	t.pending = map[string]*method{}
}

// known reports whether the method svc/name is a real one: named by the
// configuration, or declared by a service descriptor linked into the
// program (the generated code of every service a program serves or calls
// registers one).
func known(cfg *Config, svc, name string) bool {
	if s := cfg.Services[svc]; s != nil {
		if _, ok := s.Methods[name]; ok {
			return true
		}
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return false
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	return ok && sd.Methods().ByName(protoreflect.Name(name)) != nil
}

// lookup returns the policy set of fullMethod ("/pkg.Svc/Method"). After a
// method's first call it takes no lock and allocates nothing. A method the
// chain does not know, or past its bound, gets its service's or the
// defaults' OtherMethod entry (see [OtherMethod]).
func (c *Chain) lookup(fullMethod string) *method {
	st := c.state.Load()
	if m, ok := st.methods.load(fullMethod); ok {
		return m
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st = c.state.Load()
	if m, ok := st.methods.loadLocked(fullMethod); ok {
		return m
	}
	svc, name, ok := splitMethod(fullMethod)
	if ok && st.methods.n < c.opts.maxMethods && known(st.cfg, svc, name) {
		m := c.build(st, svc, name)
		st.methods.storeLocked(fullMethod, m)
		return m
	}
	// Unknown, malformed, or past the bound: the fallback entry, made once.
	if !ok || st.cfg.Services[svc] == nil {
		svc = OtherMethod
	}
	key := "/" + svc + "/" + OtherMethod
	if m, ok := st.methods.loadLocked(key); ok {
		return m
	}
	m := c.build(st, svc, OtherMethod)
	st.methods.storeLocked(key, m) // at most one per configured service, and one more
	return m
}

// splitMethod splits "/pkg.Svc/Method".
func splitMethod(full string) (svc, name string, ok bool) {
	rest, found := strings.CutPrefix(full, "/")
	if !found {
		return "", "", false
	}
	svc, name, ok = strings.Cut(rest, "/")
	return svc, name, ok && svc != "" && name != "" && !strings.Contains(name, "/")
}
