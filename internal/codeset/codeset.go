package codeset

import "github.com/meshless/meshless/config"

// Set is a set of status codes: gRPC's 0–16 and HTTP's 100–599.
type Set [10]uint64

// New returns the set of cs; codes of 640 and above are left out.
func New(cs config.Codes) Set {
	var s Set
	for _, c := range cs {
		if c < 640 {
			s[c/64] |= 1 << (c % 64)
		}
	}
	return s
}

// Has reports whether c is in s.
func (s *Set) Has(c uint32) bool { return c < 640 && s[c/64]&(1<<(c%64)) != 0 }
