package framework

// EndpointSlices is a list of discovery.k8s.io EndpointSlices as kubectl get
// -o json prints it, with the fields the suites read: each endpoint's
// addresses and readiness, and each slice's named ports.
type EndpointSlices struct {
	Items []struct {
		Endpoints []struct {
			Addresses  []string `json:"addresses"`
			Conditions struct {
				Ready *bool `json:"ready"`
			} `json:"conditions"`
		} `json:"endpoints"`
		Ports []struct {
			Name string `json:"name"`
			Port int    `json:"port"`
		} `json:"ports"`
	} `json:"items"`
}
