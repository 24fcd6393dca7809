// This file serves the meshless client's metrics for Prometheus: otelmw
// records them with the OpenTelemetry SDK, whose Prometheus exporter names
// them as docs/operations.md lists.

package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/meshless/meshless/otelmw"
)

// metricsServer is an HTTP server of /metrics and the observer whose
// metrics it serves.
type metricsServer struct {
	Addr     string // where it listens, host:port
	Observer *otelmw.Observer
	provider *sdkmetric.MeterProvider
	srv      *http.Server
	served   chan struct{}
}

// serveMetrics listens on addr and serves /metrics in Prometheus's format:
// the metrics of the Observer it returns, recorded through the OpenTelemetry
// SDK and its Prometheus exporter with the default (suffixed) names.
func serveMetrics(addr string) (*metricsServer, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, err
	}
	mp := sdkmetric.NewMeterProvider(
		sdkmetric.WithReader(exp),
		sdkmetric.WithResource(resource.NewSchemaless(attribute.String("service.name", "meshless-chaos"))),
	)
	obs, err := otelmw.New(mp)
	if err != nil {
		return nil, errors.Join(err, mp.Shutdown(context.Background()))
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, errors.Join(err, obs.Close(), mp.Shutdown(context.Background()))
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &metricsServer{
		Addr:     lis.Addr().String(),
		Observer: obs,
		provider: mp,
		srv:      &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		served:   make(chan struct{}),
	}
	go func() {
		defer close(m.served)
		m.srv.Serve(lis) //nolint:errcheck // ErrServerClosed once Close is called
	}()
	return m, nil
}

// Close stops the server and the observer.
func (m *metricsServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := errors.Join(m.srv.Shutdown(ctx), m.Observer.Close(), m.provider.Shutdown(ctx))
	<-m.served
	return err
}
