package dep

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Generate loads the build list of the module rooted at root and renders its files.
func Generate(ctx context.Context, root string) (Files, error) {
	in, err := Load(ctx, root)
	if err != nil {
		return Files{}, err
	}
	return Render(in)
}

// named returns the files with their names, manifest first.
func (f Files) named() []struct {
	name string
	data []byte
} {
	return []struct {
		name string
		data []byte
	}{{ManifestFile, f.Manifest}, {LockFile, f.Lock}}
}

// Write writes Gopkg.toml and Gopkg.lock into dir.
func (f Files) Write(dir string) error {
	for _, file := range f.named() {
		if err := os.WriteFile(filepath.Join(dir, file.name), file.data, 0o644); err != nil {
			return fmt.Errorf("failed to write %s: %v", file.name, err)
		}
	}
	return nil
}

// Compare checks the Gopkg.toml and Gopkg.lock committed in dir against f and returns
// an error that names each stale file and shows a diff from the committed to the
// rendered content.
func (f Files) Compare(dir string) error {
	var errs []error
	for _, file := range f.named() {
		committed, err := os.ReadFile(filepath.Join(dir, file.name))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s is missing: run make generate: %v", file.name, err))
			continue
		}
		if !bytes.Equal(committed, file.data) {
			errs = append(errs, fmt.Errorf("%s is stale: run make generate\n%s", file.name,
				Diff("committed/"+file.name, "generated/"+file.name, string(committed), string(file.data))))
		}
	}
	return errors.Join(errs...)
}

// Diff returns a unified-style line diff from a to b with three lines of context, under
// the headers aName and bName. It is meant for small files such as these.
func Diff(aName, bName, a, b string) string {
	x, y := splitLines(a), splitLines(b)
	// lcs[i][j] is the length of the longest common subsequence of x[i:] and y[j:].
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type op struct {
		kind byte // ' ', '-' or '+'
		line string
		a, b int // 1-based line numbers in a and b before this op
	}
	var ops []op
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			ops = append(ops, op{' ', x[i], i + 1, j + 1})
			i, j = i+1, j+1
		case i < len(x) && (j == len(y) || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, op{'-', x[i], i + 1, j + 1})
			i++
		default:
			ops = append(ops, op{'+', y[j], i + 1, j + 1})
			j++
		}
	}

	const contextLines = 3
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	for k := 0; k < len(ops); {
		if ops[k].kind == ' ' {
			k++
			continue
		}
		start := max(k-contextLines, 0)
		end := k
		// Extend the hunk while the next change is within 2*contextLines lines.
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			next := end
			for next < len(ops) && ops[next].kind == ' ' {
				next++
			}
			if next == len(ops) || next-end > 2*contextLines {
				end = min(end+contextLines, len(ops))
				break
			}
			end = next
		}
		fmt.Fprintf(&out, "@@ -%d +%d @@\n", ops[start].a, ops[start].b)
		for _, o := range ops[start:end] {
			fmt.Fprintf(&out, "%c%s\n", o.kind, o.line)
		}
		k = end
	}
	return out.String()
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
