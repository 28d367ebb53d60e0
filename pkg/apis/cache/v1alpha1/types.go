package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MemcachedList is a list of Memcached resources, as the API server returns it.
type MemcachedList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []Memcached `json:"items"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Memcached asks the operator for a memcached cluster of spec.size pods and
// reports the pods it runs in status.
type Memcached struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              MemcachedSpec   `json:"spec"`
	Status            MemcachedStatus `json:"status,omitempty"`
}

// MemcachedSpec is the desired state that users write. Only size is
// required, as in the guide; every other field is optional and has a default
// that suits a small cache. Changing any field but size, maintenanceWindow
// and networkPolicy rolls the memcached pods, one at a time.
type MemcachedSpec struct {
	// Size is the number of memcached pods to run; the CRD bounds it to 0..100.
	Size int32 `json:"size"`
	// Image is the memcached container image. Empty means the operator's
	// --memcached-image, so that one setting serves every Memcached that does
	// not need its own.
	Image string `json:"image,omitempty"`
	// Resources are the memcached container's compute resources. Nil means
	// a request of 50m CPU and 96Mi memory and a memory limit of 128Mi.
	// When set, it replaces those defaults as a whole.
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// MemoryMB is memcached's item memory in megabytes, its -m option.
	// Nil derives it from the memory limit, leaving room for what memcached
	// needs besides items (see the README), so that the kernel does not kill
	// a full cache; without a memory limit it is 64. The CRD refuses a value
	// that does not fit in the memory limit in the same way.
	MemoryMB *int32 `json:"memoryMB,omitempty"`
	// ExtraArgs are more memcached options, each in --name=value or --flag
	// form. The CRD accepts only options that tune the cache, never those
	// the operator sets (port, memory, user) nor those that would stop
	// memcached from serving (daemon, unix socket, help), and only values
	// that memcached 1.6 starts with.
	ExtraArgs []string `json:"extraArgs,omitempty"`
	// NodeSelector restricts the memcached pods to nodes with these labels.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations let the memcached pods run on nodes with matching taints.
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// PriorityClassName is the memcached pods' priority class.
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// TLS, when set, makes memcached serve TLS only, with the certificate
	// of a Secret that the pods mount; the operator never reads it.
	TLS *MemcachedTLS `json:"tls,omitempty"`
	// Auth, when set, makes memcached refuse clients that do not
	// authenticate with one of the user:password lines of a Secret.
	Auth *MemcachedAuth `json:"auth,omitempty"`
	// Monitoring, when enabled, runs the sidecar that serves memcached's
	// stats as Prometheus metrics on the pods' port named metrics.
	Monitoring *MemcachedMonitoring `json:"monitoring,omitempty"`
	// MaintenanceWindow, when set, is the weekly window in which the
	// operator's own changes to the pods start: a new default or sidecar
	// image, or the pod template of a new operator release. Nil means the
	// operator's --maintenance-window, and without one such changes start
	// at once. Changes of this spec never wait for it, and a change of the
	// window itself rolls no pod.
	MaintenanceWindow *MaintenanceWindow `json:"maintenanceWindow,omitempty"`
	// Discovery, when enabled, makes every memcached pod answer
	// ElastiCache's "config get cluster" with the Ready pods of this
	// Memcached, on the pods' and the Service's port named discovery, so
	// that clients written for ElastiCache's auto discovery follow scales
	// and replaced pods without a restart. Nil or disabled serves nothing
	// and creates no ConfigMap.
	Discovery *MemcachedDiscovery `json:"discovery,omitempty"`
	// NetworkPolicy, when enabled, makes the operator keep a NetworkPolicy
	// of the Memcached's name that admits to its pods only the clients and
	// scrapers it names, and the operator. Nil or disabled creates none,
	// and deletes the one the operator made. A change rolls no pod.
	NetworkPolicy *MemcachedNetworkPolicy `json:"networkPolicy,omitempty"`
}

// MemcachedNetworkPolicy says who may connect to the memcached pods. The
// policy admits ingress alone and denies every other connection to the
// pods; it takes effect only where the cluster's network plugin enforces
// NetworkPolicies (see docs/children.md, "NetworkPolicy").
type MemcachedNetworkPolicy struct {
	// Enabled makes the operator create and keep the NetworkPolicy.
	Enabled bool `json:"enabled"`
	// From are the peers that may reach memcached, and the discovery
	// endpoint with spec.discovery. Empty admits the pods of the
	// Memcached's own namespace alone, the clients that a cache of one
	// namespace usually serves.
	From []networkingv1.NetworkPolicyPeer `json:"from,omitempty"`
	// MonitoringFrom are the peers that may scrape the metrics port, with
	// spec.monitoring. Empty admits the namespaces that the operator's
	// --monitoring-namespace-selector selects. The operator's own pods may
	// always reach that port, which serves the sidecar's report.
	MonitoringFrom []networkingv1.NetworkPolicyPeer `json:"monitoringFrom,omitempty"`
}

// MemcachedDiscovery turns the discovery endpoint on. The membership
// reaches the pods through a ConfigMap of the Memcached's name that the
// operator owns and writes only when the Ready pods change, with a version
// one above the last; the pods mount it, so a change reaches them at the
// kubelet's next sync of the pod, and clients at their next poll after that.
type MemcachedDiscovery struct {
	// Enabled serves the discovery endpoint.
	Enabled bool `json:"enabled"`
}

// MaintenanceWindow is a weekly window in UTC: from Start on Day, for
// Duration. It is one window a week, as ElastiCache and Memorystore keep
// theirs, so that whoever reads a Memcached knows at a glance when its pods
// may be replaced without the user asking; and it is in UTC so that it
// never moves with daylight saving time. A roll that started inside the
// window finishes even after it closes: pausing one halfway would leave the
// cache on two pod templates until the next week.
type MaintenanceWindow struct {
	// Day is the weekday the window starts on, Monday to Sunday.
	Day string `json:"day"`
	// Start is the time of day, in UTC, at which the window opens, as HH:MM
	// on a 24-hour clock, such as 03:00.
	Start string `json:"start"`
	// Duration is how long the window stays open, from 1h to 24h, in hours
	// and minutes as a Go duration, such as 2h or 1h30m. A window that
	// starts late on Day goes on into the next day.
	Duration metav1.Duration `json:"duration"`
}

// ClientCertificateMode says whether memcached asks its clients for a
// certificate.
type ClientCertificateMode string

const (
	// ClientCertificatesNone accepts clients without a certificate.
	ClientCertificatesNone ClientCertificateMode = "None"
	// ClientCertificatesRequired refuses clients without a certificate that
	// the Secret's ca.crt signed.
	ClientCertificatesRequired ClientCertificateMode = "Required"
)

// MemcachedTLS names the certificate memcached serves and how it treats
// client certificates.
type MemcachedTLS struct {
	// SecretName names a kubernetes.io/tls Secret in the Memcached's
	// namespace, as cert-manager writes it: tls.crt and tls.key, and ca.crt
	// when client certificates are required. A change of its content reaches
	// memcached without a restart.
	SecretName string `json:"secretName"`
	// ClientCertificates is None (the default) or Required, which needs
	// ca.crt in the Secret.
	ClientCertificates ClientCertificateMode `json:"clientCertificates,omitempty"`
}

// MemcachedAuth names the passwords memcached accepts.
type MemcachedAuth struct {
	// SecretName names a Secret in the Memcached's namespace whose key
	// passwords holds lines of user:password, memcached's -Y file. Its first
	// line is also the sidecar's own login.
	SecretName string `json:"secretName"`
}

// MemcachedMonitoring turns the metrics sidecar on, and with it the
// Prometheus Operator's objects that scrape it and alert on it.
type MemcachedMonitoring struct {
	// Enabled runs the sidecar's metrics endpoint and exposes it on the
	// headless Service.
	Enabled bool `json:"enabled"`
	// PrometheusRule, when true with Enabled, makes the operator create a
	// PrometheusRule with the cache alerts of deploy/monitoring/rules.yaml
	// for this Memcached's pods, while the Prometheus Operator's API is
	// served. It is opt-in, so that an upgrade of the operator brings no
	// alert that nobody asked for.
	PrometheusRule bool `json:"prometheusRule,omitempty"`
	// Labels are added to those of the ServiceMonitor and the
	// PrometheusRule, so that a Prometheus that selects them by label, as
	// kube-prometheus-stack's does by its release label, finds them. The
	// operator's own labels, app and memcached_cr, cannot be set here.
	Labels map[string]string `json:"labels,omitempty"`
}

// MemcachedStatus is the observed state that only the operator writes.
type MemcachedStatus struct {
	// Nodes are the names of the memcached pods, sorted so that the field
	// changes only when the set of pods does.
	Nodes []string `json:"nodes"`
	// Replicas is the number of memcached pods; the scale subresource reads it.
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas is the number of memcached pods whose Ready condition is true.
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// Selector is the pods' label selector in string form, for the scale
	// subresource and so for `kubectl scale` and autoscalers.
	Selector string `json:"selector,omitempty"`
	// ObservedGeneration is the metadata.generation whose spec the operator
	// has acted on: it set the Deployment to that spec's size and pod
	// template, so the pods run or roll toward it. While the operator
	// refuses the spec of metadata.generation (Degraded=True InvalidSpec or
	// PolicyViolation), or cannot set the Deployment to it, this stays
	// below metadata.generation, at the generation it last acted on (0,
	// and so left out, for none), so that tools which compare the two
	// never take a spec that nothing acts on for one that is in force.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ServiceName names the headless Service that gives each memcached pod
	// a DNS name, for clients that list the servers.
	ServiceName string `json:"serviceName,omitempty"`
	// DiscoveryVersion is the version of the membership that the discovery
	// ConfigMap last held, with spec.discovery. The ConfigMap holds it too;
	// the status keeps it so that a ConfigMap deleted by hand is created
	// again with a higher version, never a lower one, which clients that
	// keep the highest version they saw would ignore. It stays after
	// discovery is turned off, so that turning it on again goes on from it.
	DiscoveryVersion int64 `json:"discoveryVersion,omitempty"`
	// Conditions say whether the memcached pods are available and, when
	// they are not, whether they are still starting or why they fail.
	Conditions []MemcachedCondition `json:"conditions,omitempty"`
}

// MemcachedConditionType names a condition of a Memcached.
type MemcachedConditionType string

const (
	// MemcachedAvailable is True once at least spec.size memcached pods are
	// Ready, so a Memcached of size 0 is always available.
	MemcachedAvailable MemcachedConditionType = "Available"
	// MemcachedProgressing is True while the memcached pods are changing
	// toward the spec the operator acted on (see
	// MemcachedStatus.ObservedGeneration): pods of an older pod template
	// are being replaced, their number differs from that spec's size, or
	// some are not Ready yet. It is False once that many pods of its
	// template are all Ready, for the generation its own observedGeneration
	// names, which stays below metadata.generation while the current spec
	// is refused or not yet acted on.
	MemcachedProgressing MemcachedConditionType = "Progressing"
	// MemcachedDegraded is True while the operator cannot manage one of the
	// Memcached's children (its Deployment, Service or PodDisruptionBudget),
	// because another owner holds its name or the API server refuses to
	// create, change or read it (a quota, RBAC or an admission policy, with
	// the API server's message), while the spec asks for what memcached
	// cannot run with or what the operator's policy does not allow, or
	// while a memcached
	// pod fails in a way that needs a change from outside, such as a crash
	// loop, an image that cannot be pulled or no node to run on. It returns
	// to False by itself once the cause is gone.
	MemcachedDegraded MemcachedConditionType = "Degraded"
)

// MemcachedCondition is one observation about a Memcached, in the shape of
// the conditions of built-in workloads.
type MemcachedCondition struct {
	// Type is the condition's name.
	Type MemcachedConditionType `json:"type"`
	// Status is True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`
	// Reason is a CamelCase word that machines can match on.
	Reason string `json:"reason,omitempty"`
	// Message explains the condition to a human.
	Message string `json:"message,omitempty"`
	// LastTransitionTime is when Status last changed.
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// ObservedGeneration is the metadata.generation whose spec the
	// condition describes; kubectl wait --for=condition=... prefers it to
	// status.observedGeneration and waits while it is below
	// metadata.generation. Available and Degraded judge the current spec,
	// so they carry metadata.generation, and a refused spec returns
	// kubectl wait --for=condition=Degraded. Progressing reports the
	// rollout of the spec the operator acted on, so it carries
	// status.observedGeneration: kubectl wait
	// --for=condition=Progressing=false returns only once the operator has
	// acted on the spec it was given and the pods have finished rolling to
	// it. Before the operator has acted on any generation there is no
	// Progressing condition.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}
