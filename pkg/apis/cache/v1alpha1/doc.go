// Package v1alpha1 holds the cache.example.com/v1alpha1 API: the Memcached
// custom resource that the memcached-operator reconciles.
//
// +k8s:deepcopy-gen=package
// +groupName=cache.example.com
package v1alpha1
