package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/kubernetes"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"go.yaml.in/yaml/v2"
)

// KubernetesSD runs Prometheus's own Kubernetes service discovery, the package
// github.com/prometheus/prometheus/discovery/kubernetes that kubernetes_sd_configs
// runs in a Prometheus server, and writes what it discovers to a file that a
// file_sd_configs entry reads. Debian's prometheus package (2.42) is built without
// Kubernetes discovery: with this, its scrape configuration keeps its
// relabel_configs unchanged, and they see the same __meta_kubernetes_* labels.
type KubernetesSD struct {
	// File is the file_sd file it writes, JSON.
	File   string
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	err    error
}

// StartKubernetesSD starts discovery with entry, one kubernetes_sd_configs entry
// as YAML, writing its targets to file and its log to file.log.
func StartKubernetesSD(entry []byte, file string) (*KubernetesSD, error) {
	var cfg kubernetes.SDConfig
	if err := yaml.UnmarshalStrict(entry, &cfg); err != nil {
		return nil, fmt.Errorf("kubernetes_sd_configs entry: %v\n%s", err, entry)
	}
	log, err := os.Create(file + ".log")
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	refresh := discovery.NewRefreshMetrics(reg)
	metrics := cfg.NewDiscovererMetrics(reg, refresh)
	if err := metrics.Register(); err != nil {
		log.Close()
		return nil, err
	}
	d, err := cfg.NewDiscoverer(discovery.DiscovererOptions{Logger: slog.New(slog.NewTextHandler(log, nil)), Metrics: metrics})
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("kubernetes discovery: %v", err)
	}
	// The file exists, empty, before Prometheus reads it.
	if err := writeFileSD(file, nil); err != nil {
		log.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	sd := &KubernetesSD{File: file, cancel: cancel, done: make(chan struct{})}
	updates := make(chan []*targetgroup.Group)
	go d.Run(ctx, updates)
	go func() {
		defer close(sd.done)
		defer log.Close()
		groups := map[string]*targetgroup.Group{}
		for {
			select {
			case <-ctx.Done():
				return
			case update := <-updates:
				for _, g := range update {
					groups[g.Source] = g
				}
				if err := writeFileSD(file, groups); err != nil {
					sd.mu.Lock()
					sd.err = err
					sd.mu.Unlock()
				}
			}
		}
	}()
	return sd, nil
}

// Err returns the last failure to write the file.
func (sd *KubernetesSD) Err() error {
	sd.mu.Lock()
	defer sd.mu.Unlock()
	return sd.err
}

// Stop ends discovery.
func (sd *KubernetesSD) Stop() {
	sd.cancel()
	<-sd.done
}

// fileSDGroup is an entry of a file_sd file.
type fileSDGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// writeFileSD writes groups to file, one entry per target, since a target's
// own labels (its container and port) are not its group's, and replaces the
// file in one rename, so that Prometheus never reads half of it.
func writeFileSD(file string, groups map[string]*targetgroup.Group) error {
	entries := []fileSDGroup{}
	for _, g := range groups {
		for _, t := range g.Targets {
			labels := map[string]string{}
			for k, v := range g.Labels {
				labels[string(k)] = string(v)
			}
			for k, v := range t {
				labels[string(k)] = string(v)
			}
			addr := labels[model.AddressLabel]
			delete(labels, model.AddressLabel)
			entries = append(entries, fileSDGroup{Targets: []string{addr}, Labels: labels})
		}
	}
	sort.Slice(entries, func(i, j int) bool {
		return strings.Join(entries[i].Targets, ",")+entries[i].Labels["__meta_kubernetes_pod_container_name"] <
			strings.Join(entries[j].Targets, ",")+entries[j].Labels["__meta_kubernetes_pod_container_name"]
	})
	data, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}
