package dep

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestCommittedFilesAreCurrent renders Gopkg.toml and Gopkg.lock from the repository's
// go.mod and fails, with a diff, when the committed files differ.
func TestCommittedFilesAreCurrent(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	files, err := Generate(ctx, root)
	if err != nil {
		t.Fatalf("failed to render the Gopkg files of %s: %v", root, err)
	}
	if err := files.Compare(root); err != nil {
		t.Fatal(err)
	}
}
