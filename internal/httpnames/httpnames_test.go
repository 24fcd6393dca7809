package httpnames_test

import (
	"reflect"
	"testing"

	"go.uber.org/goleak"

	"github.com/meshless/meshless/internal/httpnames"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHostProblem(t *testing.T) {
	const want = "want host[:port] as a request's URL writes it, such as api.weather.example or 127.0.0.1:8080"
	for host, problem := range map[string]string{
		"api.x":          "",
		"127.0.0.1:8080": "",
		"[::1]:80":       "",
		"http://api.x":   want,
		"api.x/v1":       want,
		"u@api.x":        want,
		"api.x:0":        want + "; the port must be a number 1-65535",
		"Api.X":          "write the host in lower case (api.x): hosts compare without case",
	} {
		if got := httpnames.HostProblem(host); got != problem {
			t.Errorf("HostProblem(%q) = %q, want %q", host, got, problem)
		}
	}
}

// Every refusal is reported, in the order given, in net/http's words
// without the source line of the registration.
func TestCheckRoutes(t *testing.T) {
	var got [][2]string
	httpnames.CheckRoutes([]string{"GET /a/{x}", "GET /a/{y}", "api.x/b", "GET /{", "POST /a/{y}"}, func(p, problem string) {
		got = append(got, [2]string{p, problem})
	})
	want := [][2]string{
		{"GET /a/{y}", `not a net/http ServeMux pattern: pattern "GET /a/{y}" conflicts with pattern "GET /a/{x}": GET /a/{y} matches the same requests as GET /a/{x}`},
		{"api.x/b", `want a net/http pattern "[METHOD ]/path" such as "GET /v1/current/{city}", with no host (the host is the key above it)`},
		{"GET /{", `not a net/http ServeMux pattern: parsing "GET /{": at offset 5: bad wildcard segment (must end with '}')`},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reported\n%q\nwant\n%q", got, want)
	}
}
