package catalog

import (
	_ "embed"
	"encoding/base64"
	"strings"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
)

// The catalog metadata below is what OperatorHub and the OpenShift console show; everything
// else in a CSV comes from deploy/.

const (
	displayName = "Memcached Operator"
	// shortDescription is the one-line summary for catalog tiles.
	shortDescription = "Runs memcached clusters of a chosen size and reports their pods."
	// minKubeVersion is the oldest Kubernetes whose default configuration serves all that
	// deploy/ and the operator's children use as written. 1.30 is the first release with
	// the preStop sleep action of the memcached pods (PodLifecycleSleepAction, beta) and
	// the CRD rules' optionalOldSelf (CRDValidationRatcheting, beta) on by default; the
	// rest is older: the CEL quantity library (1.29), matchLabelKeys in topology spread
	// constraints (1.27), Pod Security admission (1.25), policy/v1 budgets (1.21).
	minKubeVersion = "1.30.0"
	// capabilities is the operator's capability level. Level 1, Basic Install: the operator
	// installs, scales and rolls memcached to the image and settings a resource asks for, but
	// never picks or upgrades the memcached version itself (level 2).
	capabilities = "Basic Install"
	// maturity is the release maturity shown in catalogs; 0.0.x releases are alpha.
	maturity   = "alpha"
	categories = "Database"
	repository = "https://github.com/example-inc/memcached-operator"
	support    = "Example, Inc."

	// xPodCount is the console descriptor for a pod count that the user edits.
	xPodCount = "urn:alm:descriptor:com.tectonic.ui:podCount"
	// xConditions is the console descriptor for a list of Kubernetes conditions.
	xConditions = "urn:alm:descriptor:io.kubernetes.conditions"
	// xText and xNumber are the console descriptors of a field edited as text or a number.
	xText   = "urn:alm:descriptor:com.tectonic.ui:text"
	xNumber = "urn:alm:descriptor:com.tectonic.ui:number"
	// xResources is the console descriptor of a container's requests and limits.
	xResources = "urn:alm:descriptor:com.tectonic.ui:resourceRequirements"
	// xService is the console descriptor of the name of a Service, shown as a link to it.
	xService = "urn:alm:descriptor:io.kubernetes:Service"
)

//go:embed description.md
var description string

//go:embed icon.svg
var iconSVG []byte

var (
	keywords    = []string{"memcached", "cache", "key-value", "in-memory"}
	maintainers = []v1alpha1.Maintainer{{Name: "Memcached Operator maintainers", Email: "memcached-operator@example.com"}}
	provider    = v1alpha1.AppLink{Name: "Example, Inc.", URL: "https://example.com"}
	links       = []v1alpha1.AppLink{
		{Name: "Source Code", URL: repository},
		{Name: "Memcached", URL: "https://memcached.org"},
	}
)

// descriptor names a CRD field for the console. Its description is read from the CRD schema.
type descriptor struct {
	path         string
	displayName  string
	xDescriptors []string
}

var (
	specDescriptors = []descriptor{
		{path: "size", displayName: "Size", xDescriptors: []string{xPodCount}},
		{path: "image", displayName: "Image", xDescriptors: []string{xText}},
		{path: "resources", displayName: "Resources", xDescriptors: []string{xResources}},
		{path: "memoryMB", displayName: "Cache Memory (MB)", xDescriptors: []string{xNumber}},
		{path: "priorityClassName", displayName: "Priority Class", xDescriptors: []string{xText}},
	}
	// statusDescriptors describe status fields for display. status.nodes gets no console
	// x-descriptor on purpose: the guide's podStatuses descriptor expects a map from pod phase
	// to pod names, and status.nodes is a plain sorted list of pod names, which the console
	// shows correctly only as a plain value.
	statusDescriptors = []descriptor{
		{path: "nodes", displayName: "Nodes"},
		{path: "readyReplicas", displayName: "Ready Pods"},
		{path: "serviceName", displayName: "Service", xDescriptors: []string{xService}},
		{path: "conditions", displayName: "Conditions", xDescriptors: []string{xConditions}},
	}
)

// icon returns the catalog icon: icon.svg, base64-encoded.
func icon() v1alpha1.Icon {
	return v1alpha1.Icon{
		Data:      base64.StdEncoding.EncodeToString([]byte(strings.TrimSpace(string(iconSVG)))),
		MediaType: "image/svg+xml",
	}
}

// annotations returns the CSV's metadata annotations for a release.
func annotations(version, almExamples string) map[string]string {
	return map[string]string{
		"alm-examples":   almExamples,
		"capabilities":   capabilities,
		"categories":     categories,
		"containerImage": Image(version),
		"description":    shortDescription,
		"repository":     repository,
		"support":        support,
	}
}
