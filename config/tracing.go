package config

import (
	"net/url"
	"strings"
)

// DefaultServiceName is the default of tracing.service_name.
const DefaultServiceName = "sluice"

// Tracing exports OpenTelemetry traces of the gateway's requests: a server
// span per request and a client span per upstream attempt, sent over OTLP
// (HTTP, protobuf). Tracing is off when the section is absent.
type Tracing struct {
	// Endpoint is the base URL of the OTLP/HTTP collector
	// (http://host:port or https://host:port, with an optional path
	// prefix); spans are posted to its /v1/traces. Required.
	Endpoint string `yaml:"endpoint"`
	// Sample is the fraction of new traces recorded, in [0, 1]. A request
	// that carries a W3C traceparent follows its parent's decision: a
	// sampled parent is always recorded, an unsampled one never. Default 1.
	Sample float64 `yaml:"sample"`
	// ServiceName is the service.name resource attribute of every span.
	// Default "sluice".
	ServiceName string `yaml:"service_name"`
}

// TracesURL is the URL spans are posted to: Endpoint's path followed by
// /v1/traces, as OTLP/HTTP exporters do with a base URL.
func (t *Tracing) TracesURL() string {
	return strings.TrimSuffix(t.Endpoint, "/") + "/v1/traces"
}

func (d defaults) tracing(t *Tracing) {
	if t == nil {
		return
	}
	d.float("tracing.sample", &t.Sample, 1)
	d.str("tracing.service_name", &t.ServiceName, DefaultServiceName)
}

func (v *validator) tracing(t *Tracing) {
	if t == nil {
		return
	}
	u, err := url.Parse(t.Endpoint)
	switch {
	case t.Endpoint == "":
		v.at("tracing.endpoint", "want the collector's base URL, such as http://127.0.0.1:4318")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "":
		v.at("tracing.endpoint", "want an http or https URL with a host, such as http://127.0.0.1:4318, got %q", t.Endpoint)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(t.Endpoint, "?") || strings.HasSuffix(t.Endpoint, "#"):
		v.at("tracing.endpoint", "want a base URL without credentials, query or fragment, got %q", t.Endpoint)
	}
	if t.Sample < 0 || t.Sample > 1 {
		v.at("tracing.sample", "want a fraction in [0, 1], got %v", t.Sample)
	}
	if t.ServiceName == "" || strings.TrimSpace(t.ServiceName) != t.ServiceName || strings.ContainsFunc(t.ServiceName, isControl) {
		v.at("tracing.service_name", "want a name without control characters or spaces at either end, got %q", t.ServiceName)
	}
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
