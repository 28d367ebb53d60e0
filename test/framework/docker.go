package framework

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// dockerdTimeout bounds dockerd.sh start and stop (a cold vfs start takes seconds).
const dockerdTimeout = 2 * time.Minute

// UseDockerd starts the private Docker engine of test/scripts/dockerd.sh unless it
// runs, with this test binary as one of its users, and returns the environment the
// docker command needs (DOCKER_HOST, DOCKER_CONFIG, DOCKER_BUILDKIT). release ends
// this binary's use: the last user stops the daemon and restores the host, and
// release fails when the host is not as dockerd found it.
func UseDockerd(ctx context.Context, paths Paths) (env []string, release func() error, err error) {
	for _, cmd := range []string{"dockerd", "docker"} {
		if _, err := exec.LookPath(cmd); err != nil {
			return nil, nil, fmt.Errorf("%s is required but not on PATH: install Debian's docker.io (test/scripts/install-deps.sh)", cmd)
		}
	}
	if _, err := paths.RunScript(ctx, dockerdTimeout, "dockerd.sh", "start"); err != nil {
		return nil, nil, err
	}
	release = func() error {
		_, err := paths.RunScript(context.Background(), dockerdTimeout, "dockerd.sh", "stop")
		return err
	}
	out, err := paths.RunScript(ctx, 30*time.Second, "dockerd.sh", "env")
	if err != nil {
		if rerr := release(); rerr != nil {
			err = fmt.Errorf("%v; %v", err, rerr)
		}
		return nil, nil, err
	}
	return strings.Fields(out), release, nil
}
