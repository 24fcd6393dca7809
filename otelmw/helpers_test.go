package otelmw_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/meshless/meshless/otelmw"
)

// newProvider returns an SDK meter provider read by a ManualReader, shut
// down at the end of the test.
func newProvider(t testing.TB) (*sdkmetric.MeterProvider, *sdkmetric.ManualReader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp, r
}

// newObserver returns an Observer on a fresh SDK provider, closed at the end
// of the test.
func newObserver(t testing.TB, opts ...otelmw.Option) (*otelmw.Observer, *sdkmetric.ManualReader) {
	t.Helper()
	mp, r := newProvider(t)
	obs, err := otelmw.New(mp, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = obs.Close() })
	return obs, r
}

// scopes collects r and returns each instrumentation scope's metrics by
// name.
func scopes(t testing.TB, r *sdkmetric.ManualReader) map[string]map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		ms := out[sm.Scope.Name]
		if ms == nil {
			ms = map[string]metricdata.Metrics{}
			out[sm.Scope.Name] = ms
		}
		for _, m := range sm.Metrics {
			ms[m.Name] = m
		}
	}
	return out
}

// collect returns otelmw's metrics by name.
func collect(t testing.TB, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	return scopes(t, r)[otelmw.ScopeName]
}

// enc encodes an attribute set as the SDK does ("k=v,k=v", sorted by key).
func enc(kvs ...attribute.KeyValue) string {
	s := attribute.NewSet(kvs...)
	return s.Encoded(attribute.DefaultEncoder())
}

// values returns a sum's or gauge's data points, attribute set → value.
func values(t testing.TB, m metricdata.Metrics) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	add := func(a attribute.Set, v float64) {
		k := a.Encoded(attribute.DefaultEncoder())
		if _, dup := out[k]; dup {
			t.Errorf("%s: two data points for {%s}", m.Name, k)
		}
		out[k] = v
	}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			add(p.Attributes, float64(p.Value))
		}
	case metricdata.Sum[float64]:
		for _, p := range d.DataPoints {
			add(p.Attributes, p.Value)
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			add(p.Attributes, float64(p.Value))
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			add(p.Attributes, p.Value)
		}
	default:
		t.Fatalf("%s: %T is not a sum or a gauge", m.Name, m.Data)
	}
	return out
}

// hist is one histogram data point.
type hist struct {
	Count  uint64
	Sum    float64
	Counts []uint64 // per bucket
}

func hists(t testing.TB, m metricdata.Metrics) map[string]hist {
	t.Helper()
	d, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s: %T is not a float64 histogram", m.Name, m.Data)
	}
	out := map[string]hist{}
	for _, p := range d.DataPoints {
		if !slices.Equal(p.Bounds, buckets) {
			t.Errorf("%s: bounds %v, want %v", m.Name, p.Bounds, buckets)
		}
		out[p.Attributes.Encoded(attribute.DefaultEncoder())] = hist{Count: p.Count, Sum: p.Sum, Counts: p.BucketCounts}
	}
	return out
}

var buckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// bucketCounts returns the bucket counts of the given observations.
func bucketCounts(obs ...float64) []uint64 {
	out := make([]uint64, len(buckets)+1)
	for _, v := range obs {
		i, _ := slices.BinarySearch(buckets, v) // bounds are inclusive upper bounds
		out[i]++
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// sameValues reports the differences between got and want. A data point at
// 0 that want does not list is one of the series Attach creates at zero, so
// that Prometheus counts their first increment (TestAttachCreatesCounterSeriesAtZero).
func sameValues(t testing.TB, name string, got, want map[string]float64) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s{%s}: missing, want %v", name, k, w)
		case !near(g, w):
			t.Errorf("%s{%s} = %v, want %v", name, k, g, w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok && g != 0 {
			t.Errorf("%s{%s} = %v: unexpected data point", name, k, g)
		}
	}
}

// histPoints returns the count of each data point of any histogram.
func histPoints(m metricdata.Metrics) []uint64 {
	var out []uint64
	switch d := m.Data.(type) {
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Count)
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Count)
		}
	}
	return out
}
