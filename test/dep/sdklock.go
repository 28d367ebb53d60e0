package dep

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// LockedProject is the part of one [[projects]] entry of a dep Gopkg.lock that the
// generator reuses: where a project was locked, by commit and by tag.
type LockedProject struct {
	// Name is the project's root import path.
	Name string
	// Revision is the full commit hash.
	Revision string
	// Version is the tag, empty when the project was locked to a branch or revision.
	Version string
}

// ParseLockProjects reads the [[projects]] entries of a dep Gopkg.lock. It understands
// only what dep writes (one `key = "string"` or array per line), which is enough to
// borrow the commit hashes that a published lock records.
func ParseLockProjects(data []byte) ([]LockedProject, error) {
	var (
		projects []LockedProject
		cur      *LockedProject
		inArray  bool
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case inArray:
			inArray = !strings.HasSuffix(line, "]")
			continue
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case line == "[[projects]]":
			projects = append(projects, LockedProject{})
			cur = &projects[len(projects)-1]
			continue
		case strings.HasPrefix(line, "["):
			cur = nil
			continue
		case cur == nil:
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: want key = value, got %q", n, line)
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if strings.HasPrefix(value, "[") {
			inArray = !strings.HasSuffix(value, "]")
			continue
		}
		if !strings.HasPrefix(value, `"`) {
			continue // pruneopts and the like are not strings we need
		}
		s, err := strconv.Unquote(value)
		if err != nil {
			return nil, fmt.Errorf("line %d: bad string %s: %v", n, value, err)
		}
		switch key {
		case "name":
			cur.Name = s
		case "revision":
			cur.Revision = s
		case "version":
			cur.Version = s
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for i, p := range projects {
		if p.Name == "" {
			return nil, fmt.Errorf("project %d has no name", i+1)
		}
	}
	return projects, nil
}
