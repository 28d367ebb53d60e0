package framework

import (
	_ "github.com/google/go-containerregistry/pkg/v1/remote"
	_ "github.com/operator-framework/api/pkg/validation"
)
