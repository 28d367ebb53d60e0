package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/example-inc/memcached-operator/pkg/kube"
	"github.com/example-inc/memcached-operator/pkg/metrics"
	"github.com/example-inc/memcached-operator/pkg/stub"
)

func TestReconcileResult(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, metrics.ResultSuccess},
		{errors.New("refused"), metrics.ResultError},
		{fmt.Errorf("deployment was %w", kube.ErrReplaced), metrics.ResultConflict},
		{fmt.Errorf("%w: assignment to entry in nil map", stub.ErrPanicked), metrics.ResultPanic},
	}
	for _, tt := range tests {
		if got := reconcileResult(tt.err); got != tt.want {
			t.Errorf("reconcileResult(%v): got %q, want %q", tt.err, got, tt.want)
		}
	}
}
