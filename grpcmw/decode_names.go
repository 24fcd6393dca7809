package grpcmw

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/meshless/meshless/config"
)

// checkNames refuses a service or method name that the protobuf descriptors
// linked into the program contradict: a service its package does not have,
// or a method its service does not have. A name in a package the program
// links no service of is not checked.
func checkNames(cfg *Config, report func(path, problem string)) {
	for _, name := range slices.Sorted(maps.Keys(cfg.Services)) {
		spath := config.Join("services", name)
		fn := protoreflect.FullName(name)
		if !fn.IsValid() {
			continue // validate says what is wrong with it
		}
		desc, err := protoregistry.GlobalFiles.FindDescriptorByName(fn)
		if err != nil {
			known := servicesIn(fn.Parent())
			if len(known) > 0 {
				report(spath, fmt.Sprintf("unknown service: package %s, linked into this program, has no service %s%s",
					fn.Parent(), config.Clip(string(fn.Name())), suggest(string(fn.Name()), known, string(fn.Parent())+".")))
			}
			continue
		}
		sd, ok := desc.(protoreflect.ServiceDescriptor)
		if !ok {
			report(spath, "names a protobuf "+kindOf(desc)+", not a service")
			continue
		}
		svc := cfg.Services[name]
		if svc == nil {
			continue
		}
		for _, m := range slices.Sorted(maps.Keys(svc.Methods)) {
			if !protoreflect.Name(m).IsValid() || sd.Methods().ByName(protoreflect.Name(m)) != nil {
				continue
			}
			var known []string
			for i := range sd.Methods().Len() {
				known = append(known, string(sd.Methods().Get(i).Name()))
			}
			report(config.Join(spath+".methods", m), fmt.Sprintf(
				"unknown method: %s, linked into this program, has no method %s%s", fn, config.Clip(m), suggest(m, known, "")))
		}
	}
}

// servicesIn lists the short names of the services of package pkg that the
// program links in.
func servicesIn(pkg protoreflect.FullName) []string {
	var out []string
	protoregistry.GlobalFiles.RangeFilesByPackage(pkg, func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			out = append(out, string(fd.Services().Get(i).Name()))
		}
		return true
	})
	sort.Strings(out)
	return out
}

func kindOf(d protoreflect.Descriptor) string {
	switch d.(type) {
	case protoreflect.MessageDescriptor:
		return "message"
	case protoreflect.EnumDescriptor:
		return "enum"
	case protoreflect.MethodDescriptor:
		return "method"
	}
	return "name"
}

// suggest returns "; did you mean X?" with the known name closest to name,
// or the known names when none is close.
func suggest(name string, known []string, prefix string) string {
	best, bestDist := "", -1
	if len(name) <= 256 { // edit distance is quadratic
		for _, k := range known {
			if dist := editDistance(strings.ToLower(name), strings.ToLower(k)); bestDist < 0 || dist < bestDist {
				best, bestDist = k, dist
			}
		}
	}
	if bestDist >= 0 && bestDist <= max(2, len(name)/3) {
		return "; did you mean " + prefix + best + "?"
	}
	if len(known) > 10 {
		known = append(known[:10:10], "…")
	}
	return " (it has " + strings.Join(known, ", ") + ")"
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
