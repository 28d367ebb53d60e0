package main

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWaitForMemcachedAPI(t *testing.T) {
	tests := []struct {
		name string
		// failures is how many discovery calls fail before one succeeds; -1
		// means none ever does.
		failures int
		want     bool
	}{
		{name: "served at once", failures: 0, want: true},
		{name: "served after an outage", failures: 12, want: true},
		{name: "never served, stopped", failures: -1, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			calls := 0
			discover := func(groupVersion string) (*metav1.APIResourceList, error) {
				calls++
				if groupVersion != "cache.example.com/v1alpha1" {
					t.Errorf("discovered %q, want cache.example.com/v1alpha1", groupVersion)
				}
				if tc.failures < 0 || calls <= tc.failures {
					return nil, errors.New("the server could not find the requested resource")
				}
				return &metav1.APIResourceList{GroupVersion: groupVersion}, nil
			}
			if got := waitForMemcachedAPI(ctx, time.Millisecond, discover); got != tc.want {
				t.Errorf("waitForMemcachedAPI = %v after %d calls, want %v", got, calls, tc.want)
			}
			if tc.want && calls != tc.failures+1 {
				t.Errorf("discovery called %d times, want %d", calls, tc.failures+1)
			}
		})
	}
}
