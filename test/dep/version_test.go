package dep

import "testing"

func TestPseudoVersionRev(t *testing.T) {
	tests := []struct {
		name       string
		in         string
		wantRev    string
		wantPseudo bool
	}{
		{"no earlier tag", "v0.0.0-20180806134042-1f13a808da65", "1f13a808da65", true},
		{"after a release", "v1.0.3-0.20250322232337-35a7c28c31ee", "35a7c28c31ee", true},
		{"after a pre-release", "v1.2.3-rc.1.0.20180806134042-abcdefabcdef", "abcdefabcdef", true},
		{"after a release, pre-release base", "v1.2.4-0.20180806134042-abcdefabcdef", "abcdefabcdef", true},
		{"major version with no earlier tag", "v2.0.0-20180806134042-0123456789ab", "0123456789ab", true},
		{"incompatible", "v2.0.0-20180806134042-0123456789ab+incompatible", "0123456789ab", true},
		{"incompatible after a release", "v4.1.1-0.20190422093526-b4f3b2c47d34+incompatible", "b4f3b2c47d34", true},
		{"tag", "v1.9.3", "", false},
		{"incompatible tag", "v2.0.1+incompatible", "", false},
		{"pre-release tag", "v1.0.0-rc.1", "", false},
		{"timestamp too short", "v0.0.0-2018080613404-1f13a808da65", "", false},
		{"no .0. before the timestamp", "v1.2.3-20180806134042-1f13a808da65", "", false},
		{"no revision", "v0.0.0-20180806134042-", "", false},
		{"dep-style tag", "kubernetes-1.11.2", "", false},
		{"empty", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rev, ok := PseudoVersionRev(tt.in)
			if rev != tt.wantRev || ok != tt.wantPseudo {
				t.Errorf("PseudoVersionRev(%q) = %q, %v, want %q, %v", tt.in, rev, ok, tt.wantRev, tt.wantPseudo)
			}
		})
	}
}

func TestTagName(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"v1.9.3", "v1.9.3"},
		{"v2.0.1+incompatible", "v2.0.1"},
		{"v1.0.0-rc.1", "v1.0.0-rc.1"},
	}
	for _, tt := range tests {
		if got := TagName(tt.in); got != tt.want {
			t.Errorf("TagName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
