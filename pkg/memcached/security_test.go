package memcached_test

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/memcached"
	"github.com/example-inc/memcached-operator/pkg/memcached/memcachedtest"
	"github.com/example-inc/memcached-operator/pkg/sidecar"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// securityCases are Memcacheds with TLS, auth and monitoring in the
// combinations whose pods differ.
var securityCases = []struct {
	name string
	spec func(*v1alpha1.MemcachedSpec)
	// wantArgs follow memcached's -v in the command.
	wantArgs []string
	// wantVolumes are name:secret:keys of the pod's volumes.
	wantVolumes []string
	// wantSidecarArgs is nil when the pod has no sidecar.
	wantSidecarArgs []string
	wantPorts       []string
	// wantShared is whether the pod shares its process namespace, for the
	// sidecar's SIGHUP.
	wantShared bool
}{
	{
		name:      "none",
		spec:      func(*v1alpha1.MemcachedSpec) {},
		wantPorts: []string{"memcached"},
	},
	{
		name:            "TLS",
		spec:            func(s *v1alpha1.MemcachedSpec) { s.TLS = &v1alpha1.MemcachedTLS{SecretName: "cert"} },
		wantArgs:        []string{"-Z", "-o", "ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key"},
		wantVolumes:     []string{"tls:cert:tls.crt,tls.key"},
		wantSidecarArgs: []string{"--supervise", "--memcached=127.0.0.1:11211", "--tls-dir=/etc/memcached/tls", "--status-addr=:9150"},
		wantPorts:       []string{"memcached"},
	},
	{
		name: "TLS with client certificates",
		spec: func(s *v1alpha1.MemcachedSpec) {
			s.TLS = &v1alpha1.MemcachedTLS{SecretName: "cert", ClientCertificates: v1alpha1.ClientCertificatesRequired}
		},
		wantArgs:        []string{"-Z", "-o", "ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key,ssl_ca_cert=/etc/memcached/tls/ca.crt,ssl_verify_mode=2"},
		wantVolumes:     []string{"tls:cert:tls.crt,tls.key,ca.crt"},
		wantSidecarArgs: []string{"--supervise", "--memcached=127.0.0.1:11211", "--tls-dir=/etc/memcached/tls", "--client-cert", "--status-addr=:9150"},
		wantPorts:       []string{"memcached"},
	},
	{
		name: "TLS with client certificates, auth and monitoring",
		spec: func(s *v1alpha1.MemcachedSpec) {
			s.TLS = &v1alpha1.MemcachedTLS{SecretName: "cert", ClientCertificates: v1alpha1.ClientCertificatesRequired}
			s.Auth = &v1alpha1.MemcachedAuth{SecretName: "users"}
			s.Monitoring = &v1alpha1.MemcachedMonitoring{Enabled: true}
		},
		wantArgs: []string{"-Z", "-o", "ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key,ssl_ca_cert=/etc/memcached/tls/ca.crt,ssl_verify_mode=2",
			"-Y", "/etc/memcached/auth/passwords"},
		wantVolumes:     []string{"tls:cert:tls.crt,tls.key,ca.crt", "auth:users:passwords"},
		wantSidecarArgs: []string{"--supervise", "--memcached=127.0.0.1:11211", "--tls-dir=/etc/memcached/tls", "--client-cert", "--auth-file=/etc/memcached/auth/passwords", "--metrics-addr=:9150"},
		wantPorts:       []string{"memcached", "metrics"},
		wantShared:      true,
	},
	{
		name:            "auth only",
		spec:            func(s *v1alpha1.MemcachedSpec) { s.Auth = &v1alpha1.MemcachedAuth{SecretName: "users"} },
		wantArgs:        []string{"-Y", "/etc/memcached/auth/passwords"},
		wantVolumes:     []string{"auth:users:passwords"},
		wantSidecarArgs: []string{"--supervise", "--memcached=127.0.0.1:11211", "--auth-file=/etc/memcached/auth/passwords", "--status-addr=:9150"},
		wantPorts:       []string{"memcached"},
		wantShared:      true,
	},
	{
		name:            "monitoring only",
		spec:            func(s *v1alpha1.MemcachedSpec) { s.Monitoring = &v1alpha1.MemcachedMonitoring{Enabled: true} },
		wantSidecarArgs: []string{"--supervise", "--memcached=127.0.0.1:11211", "--metrics-addr=:9150"},
		wantPorts:       []string{"memcached", "metrics"},
	},
	{
		name:      "monitoring off",
		spec:      func(s *v1alpha1.MemcachedSpec) { s.Monitoring = &v1alpha1.MemcachedMonitoring{} },
		wantPorts: []string{"memcached"},
	},
}

func TestPodOfTLSAuthAndMonitoring(t *testing.T) {
	entrypoint := sidecarEntrypoint(t)
	if host, _, err := net.SplitHostPort(sidecar.HealthAddr); err != nil || !net.ParseIP(host).IsLoopback() {
		t.Errorf("sidecar.HealthAddr %s (%v), want a loopback IP address, which no client outside the pod reaches", sidecar.HealthAddr, err)
	}
	for _, tt := range securityCases {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", 1)
			tt.spec(&m.Spec)

			spec := memcached.NewDeployment(m, memcachedtest.Image, memcachedtest.SidecarImage).Spec.Template.Spec

			mc := spec.Containers[0]
			i := indexOf(mc.Command, "-v")
			if got := mc.Command[i+1:]; !reflect.DeepEqual(got, tt.wantArgs) && len(got)+len(tt.wantArgs) > 0 {
				t.Errorf("args after -v: got %q, want %q", got, tt.wantArgs)
			}
			var volumes []string
			for _, v := range spec.Volumes {
				s := v.Secret
				if s == nil || s.Optional == nil || *s.Optional || s.DefaultMode == nil || *s.DefaultMode != 0o440 {
					t.Errorf("volume %s: got %+v, want a Secret that is not optional, readable by owner and group", v.Name, v.VolumeSource)
					continue
				}
				var keys []string
				for _, item := range s.Items {
					if item.Path != item.Key || item.Mode != nil {
						t.Errorf("volume %s: item %+v, want the key at its own path with the volume's mode", v.Name, item)
					}
					keys = append(keys, item.Key)
				}
				volumes = append(volumes, v.Name+":"+s.SecretName+":"+strings.Join(keys, ","))
			}
			if !reflect.DeepEqual(volumes, tt.wantVolumes) {
				t.Errorf("volumes: got %v, want %v", volumes, tt.wantVolumes)
			}
			for _, c := range spec.Containers {
				for _, mount := range c.VolumeMounts {
					if mount.SubPath != "" || !mount.ReadOnly {
						t.Errorf("container %s mounts %+v, want the whole volume read-only, which the kubelet updates in place", c.Name, mount)
					}
				}
			}
			if len(mc.VolumeMounts) != len(spec.Volumes) {
				t.Errorf("memcached mounts %d volumes, want %d", len(mc.VolumeMounts), len(spec.Volumes))
			}
			if fs := spec.SecurityContext.FSGroup; (fs != nil) != (len(spec.Volumes) > 0) || fs != nil && *fs != memcached.MemcachedUID {
				t.Errorf("fsGroup: got %v, want %d only with Secret volumes", fs, memcached.MemcachedUID)
			}

			if shared := spec.ShareProcessNamespace != nil && *spec.ShareProcessNamespace; shared != tt.wantShared {
				t.Errorf("shareProcessNamespace: got %t, want %t", shared, tt.wantShared)
			}
			if tt.wantSidecarArgs == nil {
				if len(spec.Containers) != 1 {
					t.Errorf("got %d containers, want memcached alone", len(spec.Containers))
				}
			} else {
				if len(spec.Containers) != 2 {
					t.Fatalf("got %d containers, want memcached and the sidecar", len(spec.Containers))
				}
				sc := spec.Containers[1]
				if sc.Name != memcached.SidecarName || sc.Image != memcachedtest.SidecarImage {
					t.Errorf("sidecar: got %s %s, want %s %s", sc.Name, sc.Image, memcached.SidecarName, memcachedtest.SidecarImage)
				}
				if !reflect.DeepEqual(sc.Args, tt.wantSidecarArgs) {
					t.Errorf("sidecar args: got %q, want %q", sc.Args, tt.wantSidecarArgs)
				}
				if !reflect.DeepEqual(sc.VolumeMounts, mc.VolumeMounts) {
					t.Errorf("sidecar mounts %v, want memcached's %v", sc.VolumeMounts, mc.VolumeMounts)
				}
				if !reflect.DeepEqual(sc.SecurityContext, mc.SecurityContext) {
					t.Errorf("sidecar security context %+v, want memcached's %+v", sc.SecurityContext, mc.SecurityContext)
				}
				// Two Go processes, the supervisor and its worker, each
				// with GOMEMLIMIT, below the container's limit together.
				limit, ok := sc.Resources.Limits[corev1.ResourceMemory]
				if !ok {
					t.Errorf("sidecar has no memory limit")
				}
				if len(sc.Env) != 1 || sc.Env[0].Name != "GOMEMLIMIT" {
					t.Errorf("sidecar env %+v, want GOMEMLIMIT alone", sc.Env)
				} else if goLimit, err := resource.ParseQuantity(strings.TrimSuffix(sc.Env[0].Value, "B")); err != nil || 2*goLimit.Value() >= limit.Value() {
					t.Errorf("sidecar GOMEMLIMIT %s (%v), want two of them below the limit %s", sc.Env[0].Value, err, limit.String())
				}
				// Ready while it runs: no readiness probe may take a
				// serving memcached out of the Service. The liveness probe
				// runs the sidecar's binary in the container, which asks
				// the supervisor on the pod's loopback, where no client
				// can hold its connections.
				if sc.ReadinessProbe != nil {
					t.Errorf("sidecar readiness probe %+v, want none", sc.ReadinessProbe)
				}
				wantProbe := []string{entrypoint, "--probe=" + sidecar.HealthAddr}
				if p := sc.LivenessProbe; p == nil || p.Exec == nil || p.HTTPGet != nil || p.TCPSocket != nil || !reflect.DeepEqual(p.Exec.Command, wantProbe) || p.PeriodSeconds*p.FailureThreshold < 60 || p.TimeoutSeconds < 5 {
					t.Errorf("sidecar liveness probe %+v, want the exec of %q, failing after a minute, 5 s a try", p, wantProbe)
				}
				// The report is served on the metrics port, which the
				// pods without monitoring name status.
				wantPort := "status"
				if memcached.Monitored(m) {
					wantPort = memcached.MetricsPortName
				}
				if len(sc.Ports) != 1 || sc.Ports[0].Name != wantPort || sc.Ports[0].ContainerPort != memcached.MetricsPort || memcached.MetricsPort != sidecar.ReportPort {
					t.Errorf("sidecar ports %+v, want %s on %d, where the operator asks for the report (%d)", sc.Ports, wantPort, memcached.MetricsPort, sidecar.ReportPort)
				}
			}

			var ports []string
			for _, p := range memcached.NewService(m).Spec.Ports {
				if p.TargetPort.StrVal != p.Name {
					t.Errorf("service port %s targets %v, want the container port of its name", p.Name, p.TargetPort)
				}
				ports = append(ports, p.Name)
			}
			if !reflect.DeepEqual(ports, tt.wantPorts) {
				t.Errorf("service ports: got %v, want %v", ports, tt.wantPorts)
			}
		})
	}
}

// sidecarEntrypoint returns the executable that the sidecar's image runs,
// the one ENTRYPOINT of tmp/build/Dockerfile.sidecar, as JSON.
func sidecarEntrypoint(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "tmp", "build", "Dockerfile.sidecar"))
	if err != nil {
		t.Fatal(err)
	}
	var entrypoints [][]string
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "ENTRYPOINT "); ok {
			var e []string
			if err := json.Unmarshal([]byte(rest), &e); err != nil {
				t.Fatalf("Dockerfile.sidecar: %q: %v", line, err)
			}
			entrypoints = append(entrypoints, e)
		}
	}
	if len(entrypoints) != 1 || len(entrypoints[0]) != 1 {
		t.Fatalf("Dockerfile.sidecar: entrypoints %q, want one of one executable", entrypoints)
	}
	return entrypoints[0][0]
}

// TestNoSecurityAddsNoPodFields checks that a Memcached without TLS, auth
// or monitoring gets none of their pod fields, so that its pod template
// hash is the one of operator versions before them, and upgrading the
// operator rolls no pods.
func TestNoSecurityAddsNoPodFields(t *testing.T) {
	u, err := memcached.DeploymentManifest(memcached.NewDeployment(memcachedtest.NewMemcached("example", 1), memcachedtest.Image, memcachedtest.SidecarImage))
	if err != nil {
		t.Fatal(err)
	}
	spec, _, err := unstructured.NestedMap(u.Object, "spec", "template", "spec")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := spec["volumes"]; ok {
		t.Errorf("pod spec has volumes %v", v)
	}
	if fs, ok, _ := unstructured.NestedFieldNoCopy(spec, "securityContext", "fsGroup"); ok {
		t.Errorf("pod spec has fsGroup %v", fs)
	}
	containers, _, _ := unstructured.NestedSlice(spec, "containers")
	if len(containers) != 1 {
		t.Fatalf("got %d containers, want 1", len(containers))
	}
	for _, field := range []string{"env", "volumeMounts"} {
		if v, ok := containers[0].(map[string]interface{})[field]; ok {
			t.Errorf("memcached container has %s %v", field, v)
		}
	}
}

// TestNoSecretInTheEnvironment checks that no container of any pod the
// operator builds, for TLS, TLS that requires client certificates, auth,
// monitoring and all of them, takes a Secret's value into its environment,
// neither by a key reference nor whole: the Secrets reach the pod as files
// only (see secretVolumes), since environment variables travel further,
// into child processes, crash reports and the runtime's inspect output.
func TestNoSecretInTheEnvironment(t *testing.T) {
	for _, tt := range securityCases {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", 1)
			tt.spec(&m.Spec)
			spec := memcached.NewDeployment(m, memcachedtest.Image, memcachedtest.SidecarImage).Spec.Template.Spec
			for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
				for _, e := range c.Env {
					if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
						t.Errorf("container %s: env %s refers to Secret %s key %s", c.Name, e.Name, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
					}
				}
				for _, from := range c.EnvFrom {
					if from.SecretRef != nil {
						t.Errorf("container %s: envFrom Secret %s", c.Name, from.SecretRef.Name)
					}
				}
			}
		})
	}
}

func indexOf(s []string, v string) int {
	for i, e := range s {
		if e == v {
			return i
		}
	}
	return -1
}

func TestValidateSecurity(t *testing.T) {
	tests := []struct {
		name string
		spec func(*v1alpha1.MemcachedSpec)
		want string
	}{
		{name: "TLS and auth", spec: func(s *v1alpha1.MemcachedSpec) {
			s.TLS = &v1alpha1.MemcachedTLS{SecretName: "cert", ClientCertificates: v1alpha1.ClientCertificatesRequired}
			s.Auth = &v1alpha1.MemcachedAuth{SecretName: "users"}
			s.ExtraArgs = []string{"--protocol=ascii"}
		}},
		{name: "binary protocol without auth", spec: func(s *v1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"--protocol=binary"} }},
		{name: "auth with the binary protocol", spec: func(s *v1alpha1.MemcachedSpec) {
			s.Auth = &v1alpha1.MemcachedAuth{SecretName: "users"}
			s.ExtraArgs = []string{"--protocol=binary"}
		}, want: `spec.extraArgs[0]: "--protocol=binary": spec.auth needs --protocol=ascii or none`},
		{name: "auth with the auto protocol", spec: func(s *v1alpha1.MemcachedSpec) {
			s.Auth = &v1alpha1.MemcachedAuth{SecretName: "users"}
			s.ExtraArgs = []string{"--threads=2", "--protocol=auto"}
		}, want: `spec.extraArgs[1]: "--protocol=auto"`},
		{name: "TLS Secret name", spec: func(s *v1alpha1.MemcachedSpec) { s.TLS = &v1alpha1.MemcachedTLS{SecretName: "Bad_Name"} },
			want: `spec.tls.secretName: "Bad_Name" is not the name of a Secret`},
		{name: "empty auth Secret name", spec: func(s *v1alpha1.MemcachedSpec) { s.Auth = &v1alpha1.MemcachedAuth{} },
			want: `spec.auth.secretName: "" is not the name of a Secret`},
		{name: "unknown client certificate mode", spec: func(s *v1alpha1.MemcachedSpec) {
			s.TLS = &v1alpha1.MemcachedTLS{SecretName: "cert", ClientCertificates: "Optional"}
		}, want: `spec.tls.clientCertificates: "Optional" is not None or Required`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memcachedtest.NewMemcached("example", 1)
			tt.spec(&m.Spec)
			err := memcached.ValidateSpec(m)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
				t.Errorf("got %v, want an error starting %q", err, tt.want)
			}
		})
	}
}
