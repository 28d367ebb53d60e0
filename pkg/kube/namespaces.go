package kube

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// NamespaceCache tells which namespaces a label selector
// (--namespace-selector) lets the operator serve, from a cache of the
// namespaces that match it, and reports each namespace that becomes served.
// Its one informer lists and watches namespaces across the cluster, asking
// the API server for the matching ones alone, so it holds no tenant's
// namespace that the selector leaves out, and a namespace that loses the
// labels leaves the cache (the watch reports it deleted).
type NamespaceCache struct {
	selector labels.Selector
	informer cache.SharedIndexInformer
}

// NewNamespaceCache returns the cache of the namespaces that selector
// matches, listed and watched through kube. Start fills it.
func NewNamespaceCache(kube kubernetes.Interface, selector labels.Selector) *NamespaceCache {
	namespaces := kube.CoreV1().Namespaces()
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector.String()
			return namespaces.List(o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector.String()
			return namespaces.Watch(o)
		},
	}
	return &NamespaceCache{
		selector: selector,
		informer: cache.NewSharedIndexInformer(lw, &corev1.Namespace{}, 0, cache.Indexers{}),
	}
}

// Serves reports whether the cache holds namespace with labels that the
// selector matches. It checks the labels itself too, so that it never
// serves a namespace whose update the API server had no cause to filter
// out, whatever the watch delivers. Before Start has filled the cache, it
// serves none: OnServed reports each namespace once the cache holds it.
func (c *NamespaceCache) Serves(namespace string) bool {
	obj, ok, err := c.informer.GetStore().GetByKey(namespace)
	if err != nil || !ok {
		return false
	}
	return c.matches(obj)
}

// matches reports whether obj is a namespace with labels that the selector
// matches.
func (c *NamespaceCache) matches(obj interface{}) bool {
	ns, ok := obj.(*corev1.Namespace)
	return ok && c.selector.Matches(labels.Set(ns.Labels))
}

// OnServed makes the cache call served with the name of every namespace
// that becomes served: added with matching labels (as every namespace is
// when the cache is first filled, and a namespace that gains the labels is,
// to a watch with a selector), or updated from labels that did not match to
// labels that do. A namespace that stops being served is not reported: its
// Memcacheds are no longer the operator's to touch. It must be called
// before Start.
func (c *NamespaceCache) OnServed(served func(namespace string)) {
	c.informer.AddEventHandler(c.handler(served))
}

// handler is the informer's event handler of OnServed.
func (c *NamespaceCache) handler(served func(namespace string)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if c.matches(obj) {
				served(obj.(*corev1.Namespace).Name)
			}
		},
		UpdateFunc: func(old, obj interface{}) {
			if c.matches(obj) && !c.matches(old) {
				served(obj.(*corev1.Namespace).Name)
			}
		},
	}
}

// Start runs the informer until stop is closed and waits for the cache to
// be filled, failing if stop closes first.
func (c *NamespaceCache) Start(stop <-chan struct{}) error {
	go c.informer.Run(stop)
	if !cache.WaitForCacheSync(stop, c.informer.HasSynced) {
		return fmt.Errorf("stopped before the cache of namespaces labelled %s was filled", c.selector)
	}
	return nil
}
