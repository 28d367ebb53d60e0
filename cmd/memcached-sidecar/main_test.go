package main

import (
	"strings"
	"testing"
)

func TestRunRefusesBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "nothing to do", args: nil, want: "nothing to do"},
		{name: "TLS to another host", args: []string{"--tls-dir=/tls", "--memcached=198.18.0.5:11211"}, want: "must be a loopback IP address"},
		{name: "TLS to a host name", args: []string{"--tls-dir=/tls", "--memcached=localhost:11211"}, want: "must be a loopback IP address"},
		{name: "no port", args: []string{"--metrics-addr=:9150", "--memcached=127.0.0.1"}, want: "missing port"},
		{name: "zero interval", args: []string{"--tls-dir=/tls", "--refresh-interval=0s"}, want: "must be positive"},
		{name: "negative retry", args: []string{"--tls-dir=/tls", "--refresh-retry=-1s"}, want: "must not be negative"},
		{name: "unknown flag", args: []string{"--verify"}, want: "not defined"},
		{name: "metrics and status apart", args: []string{"--tls-dir=/tls", "--metrics-addr=:9150", "--status-addr=:9151"}, want: "not both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(tt.args)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
