package config_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
)

func TestTracingOffWhenAbsent(t *testing.T) {
	for _, src := range []string{base, base + "tracing:\n", base + "tracing: null\n"} {
		c, err := config.Parse("c.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		if c.Tracing != nil {
			t.Errorf("%q: tracing = %+v, want nil (off)", src, c.Tracing)
		}
	}
}

func TestTracingDefaults(t *testing.T) {
	c, err := config.Parse("c.yaml", []byte(base+"tracing: {endpoint: \"http://127.0.0.1:4318/\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	tr := c.Tracing
	if tr.Sample != 1 || tr.ServiceName != "sluice" || tr.TracesURL() != "http://127.0.0.1:4318/v1/traces" {
		t.Errorf("tracing = %+v, traces URL %s; want sample 1, service sluice, http://127.0.0.1:4318/v1/traces", tr, tr.TracesURL())
	}
	c, err = config.Parse("c.yaml", []byte(base+"tracing: {endpoint: \"https://otel.example:4318/otlp\", sample: 0, service_name: edge}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tr := c.Tracing; tr.Sample != 0 || tr.ServiceName != "edge" || tr.TracesURL() != "https://otel.example:4318/otlp/v1/traces" {
		t.Errorf("tracing = %+v, traces URL %s; want sample 0 kept, service edge, a path prefix kept", tr, tr.TracesURL())
	}
}

// TestTracingRefused checks that each unusable tracing value is an error
// at its line and column that names the YAML path.
func TestTracingRefused(t *testing.T) {
	for _, tt := range []struct{ name, src, key, want string }{
		{"no endpoint", "tracing: {sample: 0.5}\n", "tracing", `tracing.endpoint: want the collector's base URL, such as http://127.0.0.1:4318`},
		{"not a URL", "tracing: {endpoint: \"127.0.0.1:4318\"}\n", "endpoint", `tracing.endpoint: want an http or https URL with a host, such as http://127.0.0.1:4318, got "127.0.0.1:4318"`},
		{"grpc scheme", "tracing: {endpoint: \"grpc://c:4317\"}\n", "endpoint", `tracing.endpoint: want an http or https URL with a host, such as http://127.0.0.1:4318, got "grpc://c:4317"`},
		{"no host", "tracing: {endpoint: \"http://:4318\"}\n", "endpoint", `tracing.endpoint: want an http or https URL with a host, such as http://127.0.0.1:4318, got "http://:4318"`},
		{"query", "tracing: {endpoint: \"http://c:4318?x=1\"}\n", "endpoint", `tracing.endpoint: want a base URL without credentials, query or fragment, got "http://c:4318?x=1"`},
		{"credentials", "tracing: {endpoint: \"http://u:p@c:4318\"}\n", "endpoint", `tracing.endpoint: want a base URL without credentials, query or fragment, got "http://u:p@c:4318"`},
		{"sample above 1", "tracing: {endpoint: \"http://c:4318\", sample: 1.5}\n", "sample", `tracing.sample: want a fraction in [0, 1], got 1.5`},
		{"sample negative", "tracing: {endpoint: \"http://c:4318\", sample: -0.1}\n", "sample", `tracing.sample: want a fraction in [0, 1], got -0.1`},
		{"sample not a number", "tracing: {endpoint: \"http://c:4318\", sample: all}\n", "sample", `tracing.sample: want a number, got "all"`},
		{"empty service name", "tracing: {endpoint: \"http://c:4318\", service_name: \"\"}\n", "service_name", `tracing.service_name: want a name without control characters or spaces at either end, got ""`},
		{"service name with a newline", "tracing: {endpoint: \"http://c:4318\", service_name: \"a\\nb\"}\n", "service_name", `tracing.service_name: want a name without control characters or spaces at either end, got "a\nb"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := base + tt.src
			_, err := config.Parse("c.yaml", []byte(src))
			if err == nil {
				t.Fatalf("accepted:\n%s", src)
			}
			if want := valuePos(t, src, tt.key) + tt.want; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("got  %v\nwant %s", err, want)
			}
		})
	}
}
