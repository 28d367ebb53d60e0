package memcached

import (
	"strconv"
	"strings"

	"github.com/example-inc/memcached-operator/pkg/apis/cache/v1alpha1"
	"github.com/example-inc/memcached-operator/pkg/sidecar"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// DefaultSidecarImage is the image of the sidecar that refreshes memcached's
// certificates and serves its metrics, unless --sidecar-image or
// SIDECAR_IMAGE say otherwise: the sidecar's own release (sidecar.Version),
// which tmp/build/Dockerfile.sidecar builds. It is never the operator's
// release, so that an operator upgrade that leaves the sidecar alone leaves
// the pod template, and so every pod, alone.
var DefaultSidecarImage = "quay.io/example/memcached-sidecar:v" + sidecar.Version

const (
	// SidecarName names the sidecar container, which the operator polls
	// for its report (package sidecarpoll).
	SidecarName = "sidecar"
	// metricsPort is the sidecar's metrics port, memcached_exporter's, so
	// that scrape configs written for it find ours.
	metricsPort = 9150
	// sidecarBinary is the sidecar's executable in its image, the
	// ENTRYPOINT of tmp/build/Dockerfile.sidecar, which its liveness probe
	// runs.
	sidecarBinary = "/usr/local/bin/memcached-sidecar"
	// metricsPortName names the metrics port in the pods and the Service.
	metricsPortName = "metrics"
	// statusPortName names the same port in the pods without monitoring,
	// where the sidecar serves its report alone, for the operator only.
	statusPortName = "status"
	// sidecarMemoryLimit is the sidecar container's memory limit, for its
	// supervisor and its worker, and sidecarGoMemLimit each one's
	// GOMEMLIMIT: the two together stay below the limit with room for
	// what the Go runtime does not count.
	sidecarMemoryLimit = "64Mi"
	sidecarGoMemLimit  = "24MiB"
	// tlsVolume and authVolume name the Secret volumes, mounted at tlsDir
	// and authDir in both containers; the kubelet's FailedMount Events
	// name them.
	tlsVolume  = "tls"
	authVolume = "auth"
	tlsDir     = "/etc/memcached/tls"
	authDir    = "/etc/memcached/auth"
	// The keys of the Secrets that spec.tls and spec.auth name: those of a
	// kubernetes.io/tls Secret, and the -Y file.
	tlsCertKey  = corev1.TLSCertKey
	tlsKeyKey   = corev1.TLSPrivateKeyKey
	tlsCAKey    = "ca.crt"
	authFileKey = "passwords"
	// secretMode lets the files' owner, root, and the pod's fsGroup, which
	// memcached and the sidecar run in, read the Secrets' files, and no one else.
	secretMode = 0o440
	// sslVerifyRequire is memcached's ssl_verify_mode that refuses clients
	// without a certificate the CA signed.
	sslVerifyRequire = 2
)

// securityArgs are memcached's options for m's TLS and auth: with TLS, -Z
// makes every TCP listener TLS only, so plaintext is off.
func securityArgs(m *v1alpha1.Memcached) []string {
	var args []string
	if t := m.Spec.TLS; t != nil {
		opts := []string{
			"ssl_chain_cert=" + tlsDir + "/" + tlsCertKey,
			"ssl_key=" + tlsDir + "/" + tlsKeyKey,
		}
		if t.ClientCertificates == v1alpha1.ClientCertificatesRequired {
			opts = append(opts, "ssl_ca_cert="+tlsDir+"/"+tlsCAKey, "ssl_verify_mode="+strconv.Itoa(sslVerifyRequire))
		}
		args = append(args, "-Z", "-o", strings.Join(opts, ","))
	}
	if m.Spec.Auth != nil {
		args = append(args, "-Y", authDir+"/"+authFileKey)
	}
	return args
}

// secretVolumes are the pod's volumes of m's Secrets, and their mounts. Each
// volume lists, as items, the keys that memcached reads (tlsKeys; the -Y
// file), and is not optional: the kubelet then mounts it only once the
// Secret exists with every one of them, and until then starts none of the pod's
// containers, records a Warning Event FailedMount on the pod naming the
// missing Secret or key, and retries with its back-off. The status reports
// that Event (see Observation.MountFailures), since the operator may not
// read Secrets and the pod's status only shows its containers waiting in
// ContainerCreating. No Secret value is in any container's environment, and
// no other key of the Secret is in the pod.
//
// The kubelet updates such a volume's files in place when the Secret
// changes, as it does a whole Secret's (no subPath is used), which the
// sidecar's certificate refresh and password reload rely on. The files
// are readable by their owner, root, and the pod's fsGroup, which memcached
// and the sidecar run in, and no one else (secretMode).
func secretVolumes(m *v1alpha1.Memcached) ([]corev1.Volume, []corev1.VolumeMount) {
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	add := func(name, secret, dir string, keys []string) {
		mode := int32(secretMode)
		required := false
		items := make([]corev1.KeyToPath, 0, len(keys))
		for _, k := range keys {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: secret, Items: items, DefaultMode: &mode, Optional: &required},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: dir, ReadOnly: true})
	}
	if t := m.Spec.TLS; t != nil {
		add(tlsVolume, t.SecretName, tlsDir, tlsKeys(t))
	}
	if a := m.Spec.Auth; a != nil {
		add(authVolume, a.SecretName, authDir, []string{authFileKey})
	}
	return volumes, mounts
}

// tlsKeys are the keys of t's Secret that memcached reads: the certificate
// and its key, and the CA that signs clients when it requires client
// certificates. Without that, memcached reads no CA, and ca.crt, which a
// cert-manager Secret holds, is left out of the pod rather than mounted
// for nothing.
func tlsKeys(t *v1alpha1.MemcachedTLS) []string {
	keys := []string{tlsCertKey, tlsKeyKey}
	if t.ClientCertificates == v1alpha1.ClientCertificatesRequired {
		keys = append(keys, tlsCAKey)
	}
	return keys
}

// needsSidecar reports whether m's pods run the sidecar: to refresh
// certificates with TLS, to make memcached load a changed -Y file with
// auth, to serve metrics with monitoring, and to answer "config get
// cluster" with discovery.
func needsSidecar(m *v1alpha1.Memcached) bool {
	return m.Spec.TLS != nil || m.Spec.Auth != nil || Monitored(m) || Discovered(m)
}

// sharesProcesses reports whether m's pods share one process namespace:
// with auth, so that the sidecar can send memcached the SIGHUP that makes
// it load a changed -Y file, which no command of memcached's protocol
// does. Both containers run as memcachedUID, so the kernel lets the
// sidecar signal memcached without a capability, and Pod Security
// "restricted" allows the field. Each container then sees the other's
// processes and, being the same user, can read their environment, which
// holds no Secret value (see secretVolumes): the Secrets' files, which both
// mount anyway, are the only copy in the pod.
func sharesProcesses(m *v1alpha1.Memcached) bool {
	return m.Spec.Auth != nil
}

// Monitored reports whether m asks for metrics.
func Monitored(m *v1alpha1.Memcached) bool {
	return m.Spec.Monitoring != nil && m.Spec.Monitoring.Enabled
}

// sidecarContainer returns the sidecar of m's pods, running image with the
// same mounts as memcached and as restricted a security context. It talks
// to its own memcached over the pod's loopback, with TLS and auth when m
// has them.
//
// Its failures never make the pod NotReady, which would take a memcached
// that serves out of the Service: the kubelet counts every container in the
// pod's Ready condition, and one without a readiness probe, such as this,
// is Ready while it runs. So the container runs a supervisor
// (--supervise, pkg/sidecar.Supervisor) that does none of the work and
// stays up, and restarts the worker that does it whenever it exits; the
// liveness probe asks the supervisor alone (/healthz), so a worker that
// keeps failing never restarts the container, and the sidecar's report
// tells the operator instead (SidecarFailing). The probe is an exec probe,
// the sidecar's binary with --probe, which runs in the container and asks
// the supervisor's /healthz on the pod's loopback (sidecar.HealthAddr), not
// an HTTP probe of the metrics port: any pod of the cluster reaches that
// port, and a client that held all of its connections would fail the
// probe and have the kubelet restart the container, which makes the pod
// NotReady; no client can hold a loopback port. So only the sidecar's own
// failure, such as a SIGKILL of the container, takes memcached out of its
// Service, never what a client sends. The memory limit is the
// container's, for both processes; GOMEMLIMIT, which each inherits, keeps
// either process's Go heap well below it, and an OOM kills the worker,
// whose oom_score_adj is the highest, unless the supervisor grew larger.
func sidecarContainer(m *v1alpha1.Memcached, image string, mounts []corev1.VolumeMount, security *corev1.SecurityContext) corev1.Container {
	args := []string{"--supervise", "--memcached=127.0.0.1:" + strconv.Itoa(memcachedPort)}
	if t := m.Spec.TLS; t != nil {
		args = append(args, "--tls-dir="+tlsDir)
		if t.ClientCertificates == v1alpha1.ClientCertificatesRequired {
			args = append(args, "--client-cert")
		}
	}
	if m.Spec.Auth != nil {
		args = append(args, "--auth-file="+authDir+"/"+authFileKey)
	}
	c := corev1.Container{
		Name:                     SidecarName,
		Image:                    image,
		Args:                     args,
		Env:                      []corev1.EnvVar{{Name: "GOMEMLIMIT", Value: sidecarGoMemLimit}},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		VolumeMounts:             mounts,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:              resource.MustParse("5m"),
				corev1.ResourceMemory:           resource.MustParse("24Mi"),
				corev1.ResourceEphemeralStorage: resource.MustParse(logStorageRequest),
			},
			Limits: corev1.ResourceList{
				corev1.ResourceMemory:           resource.MustParse(sidecarMemoryLimit),
				corev1.ResourceEphemeralStorage: resource.MustParse(logStorageLimit),
			},
		},
		SecurityContext: security,
	}
	// Every sidecar serves its report (sidecar.ReportPath) on the metrics
	// port, for the operator's poll; with monitoring, its metrics too.
	port := statusPortName
	if Monitored(m) {
		port = metricsPortName
		c.Args = append(c.Args, "--metrics-addr=:"+strconv.Itoa(metricsPort))
	} else {
		c.Args = append(c.Args, "--status-addr=:"+strconv.Itoa(metricsPort))
	}
	c.Ports = []corev1.ContainerPort{{Name: port, ContainerPort: metricsPort, Protocol: corev1.ProtocolTCP}}
	if Discovered(m) {
		// The discovery endpoint speaks TLS with --tls-dir's certificate,
		// and asks for --client-cert's client certificates, and logs clients
		// in against --auth-file, as memcached does with the same files.
		c.Args = append(c.Args, discoveryArgs()...)
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: discoveryPortName, ContainerPort: discoveryPort, Protocol: corev1.ProtocolTCP})
	}
	c.LivenessProbe = &corev1.Probe{
		Handler: corev1.Handler{
			Exec: &corev1.ExecAction{Command: []string{sidecarBinary, "--probe=" + sidecar.HealthAddr}},
		},
		// A minute without an answer: the supervisor answers at once
		// unless it hangs, and a restart of the container, which makes
		// the pod NotReady for a moment, must not come from a slow node.
		// --probe gives up after 3 s, within the timeout, so that the
		// kubelet's Event says why.
		PeriodSeconds:    10,
		TimeoutSeconds:   5,
		FailureThreshold: 6,
	}
	return c
}
