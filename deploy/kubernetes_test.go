package deploy_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/sluicehq/sluice/config"
)

// manifest is what TestKubernetes reads of deploy/kubernetes/sluice.yaml.
type manifest struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
		Ports []struct {
			Name       string `yaml:"name"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type podSpec struct {
	TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot bool `yaml:"runAsNonRoot"`
		RunAsUser    int  `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	Containers []struct {
		Args  []string `yaml:"args"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		ReadinessProbe probe `yaml:"readinessProbe"`
		LivenessProbe  probe `yaml:"livenessProbe"`
		Lifecycle      struct {
			PreStop struct {
				Sleep struct {
					Seconds int `yaml:"seconds"`
				} `yaml:"sleep"`
			} `yaml:"preStop"`
		} `yaml:"lifecycle"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	} `yaml:"containers"`
	Volumes []struct {
		Name   string `yaml:"name"`
		Secret struct {
			SecretName string `yaml:"secretName"`
		} `yaml:"secret"`
	} `yaml:"volumes"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

// readManifests decodes every document of the Kubernetes manifest, by kind.
func readManifests(t *testing.T) map[string]manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "deploy/kubernetes/sluice.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]manifest{}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var m manifest
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		out[m.Kind] = m
	}
	return out
}

// TestKubernetes checks the Kubernetes manifest against the configuration
// it carries and the image the Dockerfile builds: the configuration
// validates, the container's ports are its listeners', the probes are the
// admin API's, the mounted Secret holds the file the arguments name, the
// grace period covers the preStop wait and the shutdown, and the user is
// the image's.
func TestKubernetes(t *testing.T) {
	ms := readManifests(t)
	for _, kind := range []string{"Secret", "Deployment", "Service", "PodDisruptionBudget"} {
		if _, ok := ms[kind]; !ok {
			t.Fatalf("no %s in the manifest", kind)
		}
	}
	secret, dep, svc := ms["Secret"], ms["Deployment"], ms["Service"]
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if len(c.Args) != 3 || c.Args[0] != "serve" || c.Args[1] != "--config" {
		t.Fatalf("args %q, want serve --config FILE", c.Args)
	}
	file := c.Args[2]
	src, ok := secret.StringData[path.Base(file)]
	if !ok {
		t.Fatalf("the Secret has no %s", path.Base(file))
	}
	cfg, err := config.Parse(file, []byte(src))
	if err != nil {
		t.Fatalf("the configuration does not validate: %v", err)
	}

	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for name, addr := range map[string]string{"http": cfg.Listen, "admin": cfg.Admin.Listen} {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		if host != "0.0.0.0" && host != "" {
			t.Errorf("%s listens on %s: the kubelet and the Service cannot reach it", name, addr)
		}
		if want, _ := net.LookupPort("tcp", port); ports[name] != want {
			t.Errorf("container port %s = %d, the configuration listens on %s", name, ports[name], addr)
		}
	}
	if p := c.ReadinessProbe.HTTPGet; p.Path != "/readyz" || p.Port != "admin" {
		t.Errorf("readiness probe %+v, want /readyz on admin", p)
	}
	if p := c.LivenessProbe.HTTPGet; p.Path != "/healthz" || p.Port != "admin" {
		t.Errorf("liveness probe %+v, want /healthz on admin", p)
	}
	if len(svc.Spec.Ports) == 0 || ports[svc.Spec.Ports[0].TargetPort] == 0 {
		t.Errorf("the Service's target port %+v is no container port", svc.Spec.Ports)
	}

	mounted := false
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.Secret.SecretName == secret.Metadata.Name && m.MountPath == path.Dir(file) {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("the Secret %s is not mounted at %s", secret.Metadata.Name, path.Dir(file))
	}

	wait := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds)*time.Second + cfg.Server.ShutdownTimeout.D()
	if grace := time.Duration(pod.TerminationGracePeriodSeconds) * time.Second; grace <= wait {
		t.Errorf("terminationGracePeriodSeconds %v does not cover the preStop wait and server.shutdown_timeout (%v)", grace, wait)
	}
	if !pod.SecurityContext.RunAsNonRoot || pod.SecurityContext.RunAsUser != 65532 {
		t.Errorf("security context %+v, want non-root uid 65532 (distroless's nonroot, the image's USER)", pod.SecurityContext)
	}
	for k, v := range dep.Spec.Selector.MatchLabels {
		if dep.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("the Deployment's selector %s=%s does not select its pods", k, v)
		}
	}
	if !slices.Contains(parseDockerfile(t)[1].find("USER"), "nonroot:nonroot") {
		t.Errorf("the image's user is no longer distroless's nonroot (uid 65532): update the manifest")
	}
}
