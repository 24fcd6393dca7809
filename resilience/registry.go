package resilience

import (
	"errors"
	"strconv"
	"sync"
)

// ErrRegistryFull is matched with [errors.Is] by the error a [Registry]
// returns when creating one more instance would pass its bound.
var ErrRegistryFull = errors.New("registry full")

// RegistryFullError is the error of a [Registry] at its bound.
type RegistryFullError struct {
	Limit int    // the registry's bound
	Key   string // the key that was refused
}

func (e *RegistryFullError) Error() string {
	return "registry full: " + strconv.Itoa(e.Limit) + " instances, refusing key " + strconv.Quote(e.Key)
}

// Is reports whether target is [ErrRegistryFull].
func (e *RegistryFullError) Is(target error) bool { return target == ErrRegistryFull }

// Registry holds one instance per key (a breaker per service, say) and
// creates it on first use. It holds at most a fixed number of instances:
// keys often come from the wire (method names), and an unbounded map keyed by
// them is a memory leak an attacker can drive.
//
// Get is lock-free once a key exists. A Registry is safe for concurrent use;
// its zero value is not usable, use [NewRegistry].
type Registry[V any] struct {
	create func(key string) (V, error)
	limit  int

	m  sync.Map // string -> V
	mu sync.Mutex
	n  int
}

// NewRegistry returns a registry that creates instances with create and holds
// at most limit of them (limit <= 0 means no bound). create is called at most
// once per key, under the registry's lock; a key whose create fails is not
// stored, and the next Get tries again.
func NewRegistry[V any](limit int, create func(key string) (V, error)) *Registry[V] {
	return &Registry[V]{create: create, limit: limit}
}

// Get returns the instance for key, creating it if needed. It returns a
// *[RegistryFullError] when the key is new and the registry is at its bound,
// or the error of create.
func (r *Registry[V]) Get(key string) (V, error) {
	if v, ok := r.m.Load(key); ok {
		return v.(V), nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.m.Load(key); ok {
		return v.(V), nil
	}
	var zero V
	if r.limit > 0 && r.n >= r.limit {
		return zero, &RegistryFullError{Limit: r.limit, Key: key}
	}
	v, err := r.create(key)
	if err != nil {
		return zero, err
	}
	r.m.Store(key, v)
	r.n++
	return v, nil
}

// Lookup returns the instance for key if it exists, without creating it.
func (r *Registry[V]) Lookup(key string) (V, bool) {
	v, ok := r.m.Load(key)
	if !ok {
		var zero V
		return zero, false
	}
	return v.(V), true
}

// Len returns the number of instances.
func (r *Registry[V]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// Range calls f for each instance until f returns false, in no set order.
func (r *Registry[V]) Range(f func(key string, v V) bool) {
	r.m.Range(func(k, v any) bool { return f(k.(string), v.(V)) })
}
